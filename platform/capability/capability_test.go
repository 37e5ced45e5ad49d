package capability

import (
	"strings"
	"testing"
)

func caps(ops []Op, topics, rooms []string) []Capability {
	return []Capability{{Ops: ops, Topics: topics, Rooms: rooms}}
}

func TestAllows(t *testing.T) {
	room42 := caps([]Op{OpPublish, OpSubscribe}, []string{"chat"}, []string{"room-42"})
	chatStar := caps([]Op{OpPublish}, []string{"chat-*"}, nil)
	cases := []struct {
		name        string
		caps        []Capability
		op          Op
		topic, room string
		want        bool
	}{
		{"room cap, its room", room42, OpPublish, "chat", "room-42", true},
		{"room cap, other room", room42, OpPublish, "chat", "room-43", false},
		{"room cap, no room", room42, OpPublish, "chat", "", false},
		{"room cap, other topic", room42, OpPublish, "orders", "room-42", false},
		{"room cap, poll", room42, OpPoll, "chat", "", false},
		{"room cap, subscribe its room", room42, OpSubscribe, "chat", "room-42", true},
		{"room cap, subscribe whole topic", room42, OpSubscribe, "chat", "", false},
		{"prefix topic", chatStar, OpPublish, "chat-1", "", true},
		{"prefix topic, empty rest", chatStar, OpPublish, "chat-", "any", true},
		{"prefix topic, other", chatStar, OpPublish, "chat", "", false},
		{"admin tenant-wide", ForRole(RoleAdmin), OpKeysManage, "", "", true},
		{"producer no keys", ForRole(RoleProducer), OpKeysManage, "", "", false},
		{"producer publish any room", ForRole(RoleProducer), OpPublish, "x", "r", true},
		{"consumer poll", ForRole(RoleConsumer), OpPoll, "x", "", true},
		{"consumer publish", ForRole(RoleConsumer), OpPublish, "x", "", false},
		{"topic-limited keys.manage", caps([]Op{OpKeysManage}, []string{"chat"}, nil), OpKeysManage, "", "", false},
		{"topics.read ignores rooms", caps([]Op{OpTopicsRead}, []string{"chat"}, []string{"r1"}), OpTopicsRead, "chat", "", true},
		{"room pattern", caps([]Op{OpSubscribe}, []string{"*"}, []string{"eu-*"}), OpSubscribe, "t", "eu-west", true},
	}
	for _, c := range cases {
		if got := Allows(c.caps, c.op, c.topic, c.room); got != c.want {
			t.Errorf("%s: Allows(%s, %q, %q) = %v, want %v", c.name, c.op, c.topic, c.room, got, c.want)
		}
	}
}

func TestSubset(t *testing.T) {
	have := caps([]Op{OpPublish, OpSubscribe}, []string{"chat-*"}, []string{"room-*"})
	ok := [][]Capability{
		caps([]Op{OpPublish}, []string{"chat-1"}, []string{"room-42"}),
		caps([]Op{OpSubscribe}, []string{"chat-a*"}, []string{"room-4*"}),
	}
	for _, w := range ok {
		if err := Subset(w, have); err != nil {
			t.Errorf("Subset(%+v) = %v, want nil", w, err)
		}
	}
	bad := [][]Capability{
		caps([]Op{OpPoll}, []string{"chat-1"}, nil),
		caps([]Op{OpPublish}, []string{"chat"}, []string{"room-1"}),
		caps([]Op{OpPublish}, []string{"chat-*"}, nil), // every room is wider
		caps([]Op{OpPublish}, []string{"*"}, []string{"room-1"}),
		caps([]Op{OpAll}, []string{"chat-1"}, []string{"room-1"}),
	}
	for _, w := range bad {
		if err := Subset(w, have); err == nil {
			t.Errorf("Subset(%+v) = nil, want overreach", w)
		}
	}
	if err := Subset(ForRole(RoleProducer), ForRole(RoleAdmin)); err != nil {
		t.Errorf("producer ⊆ admin: %v", err)
	}
	if err := Subset(ForRole(RoleAdmin), ForRole(RoleProducer)); err == nil {
		t.Error("admin ⊆ producer accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range [][]Capability{
		nil,
		caps(nil, []string{"*"}, nil),
		caps([]Op{"fly"}, []string{"*"}, nil),
		caps([]Op{OpPublish}, nil, nil),
		caps([]Op{OpPublish}, []string{"a*b"}, nil),
		caps([]Op{OpPublish}, []string{"*"}, []string{""}),
	} {
		if Validate(bad) == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
	if err := Validate(caps([]Op{OpPublish}, []string{"chat-*"}, []string{"room-42"})); err != nil {
		t.Fatal(err)
	}
	// Pattern counts are bounded, per capability and in all.
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "r" + strings.Repeat("x", i%5)
		}
		return out
	}
	if Validate(caps([]Op{OpSubscribe}, []string{"t"}, many(MaxPatterns+1))) == nil {
		t.Error("65 room patterns accepted")
	}
	if Validate(caps([]Op{OpSubscribe}, many(MaxPatterns+1), nil)) == nil {
		t.Error("65 topic patterns accepted")
	}
	if err := Validate(caps([]Op{OpSubscribe}, many(MaxPatterns), many(MaxPatterns))); err != nil {
		t.Errorf("64 and 64 patterns refused: %v", err)
	}
	var big []Capability
	for i := 0; i < 3; i++ {
		big = append(big, caps([]Op{OpSubscribe}, many(MaxPatterns), many(MaxPatterns))...)
	}
	if Validate(big) == nil {
		t.Error("384 patterns in all accepted")
	}
}

// FuzzSubsetSound: whatever a subset allows, the superset allows too, for
// any operation, topic and room; and Match agrees with covers on names.
func FuzzSubsetSound(f *testing.F) {
	f.Add("chat-*", "room-*", "chat-1", "room-4*", "chat-1", "room-42", uint8(0))
	f.Add("*", "", "a*", "b", "abc", "b", uint8(1))
	f.Add("x", "r", "x", "r", "x", "", uint8(2))
	ops := []Op{OpPublish, OpSubscribe, OpPoll, OpTopicsRead, OpKeysManage}
	f.Fuzz(func(t *testing.T, haveTopic, haveRoom, wantTopic, wantRoom, topic, room string, opi uint8) {
		norm := func(s string) string { // keep patterns well-formed
			body, wild := strings.CutSuffix(s, "*")
			body = strings.ReplaceAll(body, "*", "")
			if wild {
				return body + "*"
			}
			if body == "" {
				return "*"
			}
			return body
		}
		roomsOf := func(s string) []string {
			if s == "" {
				return nil
			}
			return []string{norm(s)}
		}
		op := ops[int(opi)%len(ops)]
		have := caps([]Op{op}, []string{norm(haveTopic)}, roomsOf(haveRoom))
		want := caps([]Op{op}, []string{norm(wantTopic)}, roomsOf(wantRoom))
		if Subset(want, have) != nil {
			return
		}
		if Allows(want, op, topic, room) && !Allows(have, op, topic, room) {
			t.Fatalf("want %+v ⊆ have %+v, but want allows %s %q %q and have does not", want, have, op, topic, room)
		}
		p := norm(haveTopic)
		if !strings.Contains(topic, "*") && covers(p, topic) != Match(p, topic) {
			t.Fatalf("covers(%q, %q) != Match", p, topic)
		}
	})
}
