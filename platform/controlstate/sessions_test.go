package controlstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPanelSessionEnded(t *testing.T) {
	s := NewState()
	until := time.Now().Add(time.Hour)
	if s.SessionEnded("s1") {
		t.Fatal("a session nobody logged out is ended")
	}
	if err := s.Apply(event(TypePanelSessionEnded, PanelSessionEndedData{Tenant: "t", SessionID: "s1", Until: until})); err != nil {
		t.Fatal(err)
	}
	if !s.SessionEnded("s1") || s.SessionEnded("s2") {
		t.Fatal("SessionEnded: want s1 only")
	}
	// A session past its expiry is not remembered (its cookie is refused
	// for its expiry anyway).
	if err := s.Apply(event(TypePanelSessionEnded, PanelSessionEndedData{Tenant: "t", SessionID: "old", Until: time.Now().Add(-time.Second)})); err != nil {
		t.Fatal(err)
	}
	if s.SessionEnded("old") || len(s.ended) != 1 {
		t.Fatalf("an expired session is held: %v", s.ended)
	}
	for _, d := range []PanelSessionEndedData{
		{SessionID: "s3", Until: until},
		{Tenant: "t", Until: until},
		{Tenant: "t", SessionID: strings.Repeat("x", 129), Until: until},
	} {
		if err := s.Apply(event(TypePanelSessionEnded, d)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalid", d, err)
		}
	}
}

// The ended sessions are bounded: once full, the expired ones make room.
func TestPanelSessionsEndedAreBounded(t *testing.T) {
	s := NewState()
	s.ended = map[string]time.Time{}
	for i := 0; i < maxEndedSessions; i++ {
		s.ended[fmt.Sprintf("s%d", i)] = time.Now().Add(-time.Minute)
	}
	if err := s.Apply(event(TypePanelSessionEnded, PanelSessionEndedData{Tenant: "t", SessionID: "new", Until: time.Now().Add(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	if len(s.ended) != 1 || !s.SessionEnded("new") {
		t.Fatalf("after one more logout with %d expired held: %d held", maxEndedSessions, len(s.ended))
	}
	// Full of live entries: a further logout is not held (the map never
	// grows past the bound).
	for i := 0; len(s.ended) < maxEndedSessions; i++ {
		s.ended[fmt.Sprintf("live%d", i)] = time.Now().Add(time.Hour)
	}
	if err := s.Apply(event(TypePanelSessionEnded, PanelSessionEndedData{Tenant: "t", SessionID: "over", Until: time.Now().Add(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	if len(s.ended) != maxEndedSessions || s.SessionEnded("over") {
		t.Fatalf("a logout past the bound: %d held (bound %d), over held %v", len(s.ended), maxEndedSessions, s.SessionEnded("over"))
	}
}
