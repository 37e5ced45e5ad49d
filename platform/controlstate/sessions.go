package controlstate

import (
	"fmt"
	"time"
)

// TypePanelSessionEnded: a panel session was logged out. Every node keeps
// the session's id until the session would have expired, so a copy of its
// cookie opens no page on any node (the panel's sessions are sealed
// cookies, valid on every node).
const TypePanelSessionEnded = "panel.session_ended"

// PanelSessionEndedData ends panel session SessionID of Tenant; Until is
// when the session would have expired.
type PanelSessionEndedData struct {
	Tenant    string    `json:"tenant"`
	SessionID string    `json:"session_id"`
	Until     time.Time `json:"until"`
}

// maxEndedSessions bounds the ended sessions every node holds: when it is
// reached, the expired ones are dropped, and a logout beyond it ends the
// session only on the node that served it.
const maxEndedSessions = 10000

func (s *State) applySessionLocked(ev Event) (handled bool, err error) {
	if ev.Type != TypePanelSessionEnded {
		return false, nil
	}
	var d PanelSessionEndedData
	if err := decode(ev, &d); err != nil {
		return true, err
	}
	if d.Tenant == "" || d.SessionID == "" || len(d.SessionID) > 128 {
		return true, fmt.Errorf("%w: %s: want a tenant and a session id of at most 128 bytes", ErrInvalid, ev.Type)
	}
	now := time.Now()
	if !d.Until.After(now) {
		return true, nil // expired already: nothing to remember
	}
	if s.ended == nil {
		s.ended = map[string]time.Time{}
	}
	if len(s.ended) >= maxEndedSessions {
		// Drop the expired ones, at most once a second (a flood of
		// logouts must not scan the map on every event under the lock).
		if now.Sub(s.endedPruned) >= time.Second {
			s.endedPruned = now
			for id, until := range s.ended {
				if !until.After(now) {
					delete(s.ended, id)
				}
			}
		}
		if len(s.ended) >= maxEndedSessions {
			// Full of live entries: this session ends on the node that
			// logged it out (its own bounded list), not on the others.
			return true, nil
		}
	}
	s.ended[d.SessionID] = d.Until
	return true, nil
}

// SessionEnded reports whether panel session id was logged out (on any
// node) and would not have expired yet.
func (s *State) SessionEnded(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	until, ok := s.ended[id]
	return ok && until.After(time.Now())
}
