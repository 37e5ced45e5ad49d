// Package capability is MsgMesh's permission model: operations × topics ×
// rooms (spec sections 4 and 5). Roles are named capability sets; tokens
// carry a subset of their parent key's capabilities.
package capability

import (
	"fmt"
	"sort"
	"strings"
)

// Capability grants operations on topics and rooms (spec sections 4 and 5):
// a credential may do op on topic t in room r when one of its capabilities
// lists op (or "*"), matches t and matches r.
//
// Topics and Rooms hold exact names or patterns: "*" matches everything,
// and a trailing "*" matches by prefix ("chat-*" matches "chat-1" and
// "chat-"). No other character is special. Empty Rooms means every room.
//
// A request without a room (publishing with no room, polling, subscribing
// to a whole topic) needs a capability that covers every room ("*").
type Capability struct {
	Ops    []Op     `json:"ops"`
	Topics []string `json:"topics"`
	Rooms  []string `json:"rooms,omitempty"`
}

// Op is an operation.
type Op string

// Operations. Publish, subscribe and poll are room-scoped: a capability's
// rooms restrict them. The others ignore rooms. Keys, tokens and tenant
// settings are tenant-wide: they need a capability on every topic ("*").
const (
	OpPublish        Op = "publish"         // POST /v1/topics/{topic}/messages
	OpSubscribe      Op = "subscribe"       // SSE and WebSocket
	OpPoll           Op = "poll"            // poll and commit (whole topic)
	OpTopicsRead     Op = "topics.read"     // GET /v1/topics[/{topic}]
	OpTopicsManage   Op = "topics.manage"   // POST /v1/topics, DELETE /v1/topics/{topic}
	OpWebhooksManage Op = "webhooks.manage" // /v1/webhooks
	OpKeysManage     Op = "keys.manage"     // /v1/keys
	OpTokensMint     Op = "tokens.mint"     // POST /v1/tokens
	OpTenantSettings Op = "tenant.settings" // PATCH /v1/tenant
	OpAll            Op = "*"               // every operation
)

// Roles.
const (
	RoleAdmin    = "admin"
	RoleProducer = "producer"
	RoleConsumer = "consumer"
)

var roomScoped = map[Op]bool{OpPublish: true, OpSubscribe: true, OpPoll: true}

// AllOps lists every operation a capability may name.
var AllOps = []Op{OpPublish, OpSubscribe, OpPoll, OpTopicsRead, OpTopicsManage, OpWebhooksManage, OpKeysManage, OpTokensMint, OpTenantSettings}

// tenantWide operations are not about one topic: a capability grants them
// only when its topics cover every topic ("*").
var tenantWide = map[Op]bool{OpKeysManage: true, OpTokensMint: true, OpTenantSettings: true}

// Roles as capability sets:
//
//	admin     * on every topic and room
//	producer  publish, topics.read, tokens.mint on every topic and room
//	consumer  poll, subscribe, topics.read, tokens.mint on every topic and room
var roleCaps = map[string][]Capability{
	RoleAdmin:    {{Ops: []Op{OpAll}, Topics: []string{"*"}}},
	RoleProducer: {{Ops: []Op{OpPublish, OpTopicsRead, OpTokensMint}, Topics: []string{"*"}}},
	RoleConsumer: {{Ops: []Op{OpPoll, OpSubscribe, OpTopicsRead, OpTokensMint}, Topics: []string{"*"}}},
}

// ForRole returns the capability set a role stands for (nil if unknown).
func ForRole(role string) []Capability { return roleCaps[role] }

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool { _, ok := roleCaps[r]; return ok }

// Match reports whether pattern matches name (see Capability).
func Match(pattern, name string) bool {
	if pattern == "*" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// covers reports whether every name pattern q matches is matched by p.
func covers(p, q string) bool {
	if p == "*" {
		return true
	}
	pp, pWild := strings.CutSuffix(p, "*")
	qp, qWild := strings.CutSuffix(q, "*")
	if q == "*" {
		return false
	}
	if !pWild {
		return !qWild && p == q
	}
	// p = "pp*": q's names all start with qp (q wild) or are q itself.
	if qWild {
		return strings.HasPrefix(qp, pp)
	}
	return strings.HasPrefix(q, pp)
}

func anyMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}

func allRooms(c Capability) bool {
	if len(c.Rooms) == 0 {
		return true
	}
	for _, r := range c.Rooms {
		if r == "*" {
			return true
		}
	}
	return false
}

func hasOp(c Capability, op Op) bool {
	for _, o := range c.Ops {
		if o == op || o == OpAll {
			return true
		}
	}
	return false
}

// Allows reports whether caps permit op on topic in room. topic "" asks
// for a tenant-wide operation; for room-scoped operations room "" asks for
// every room of the topic.
func Allows(caps []Capability, op Op, topic, room string) bool {
	for _, c := range caps {
		if !hasOp(c, op) {
			continue
		}
		if topic == "" || tenantWide[op] {
			if !containsStar(c.Topics) {
				continue
			}
		} else if !anyMatch(c.Topics, topic) {
			continue
		}
		if !roomScoped[op] {
			return true
		}
		if room == "" {
			if allRooms(c) {
				return true
			}
			continue
		}
		if len(c.Rooms) == 0 || anyMatch(c.Rooms, room) {
			return true
		}
	}
	return false
}

func containsStar(ps []string) bool {
	for _, p := range ps {
		if p == "*" {
			return true
		}
	}
	return false
}

// Subset returns nil when every grant of want is within have, or an error
// naming the first grant that is not (downscoping may only narrow).
func Subset(want, have []Capability) error {
	for _, w := range want {
		rooms := w.Rooms
		if len(rooms) == 0 {
			rooms = []string{"*"}
		}
		ops := w.Ops
		if len(ops) == 1 && ops[0] == OpAll {
			ops = AllOps
		}
		for _, op := range ops {
			for _, t := range w.Topics {
				for _, r := range rooms {
					if !grantCovered(have, op, t, r) {
						return fmt.Errorf("%s on topic %q room %q is beyond the caller's capabilities", op, t, r)
					}
				}
			}
		}
	}
	return nil
}

func grantCovered(have []Capability, op Op, topic, room string) bool {
	for _, c := range have {
		if !hasOp(c, op) {
			continue
		}
		topicOK := false
		for _, p := range c.Topics {
			if covers(p, topic) {
				topicOK = true
				break
			}
		}
		if !topicOK {
			continue
		}
		if allRooms(c) || !roomScoped[op] {
			return true
		}
		for _, p := range c.Rooms {
			if covers(p, room) {
				return true
			}
		}
	}
	return false
}

// MaxPatterns caps the topic patterns, and the room patterns, of one
// capability; MaxTotalPatterns caps them over a whole capability set (so a
// key's control event stays small: at most 256 patterns of 200 bytes).
const (
	MaxPatterns      = 64
	MaxTotalPatterns = 256
)

// Validate checks a capability set from a request: known operations, at
// least one topic, patterns made of name characters with at most one
// trailing "*". It returns one error naming the problem.
func Validate(caps []Capability) error {
	if len(caps) == 0 {
		return fmt.Errorf("capabilities is empty")
	}
	if len(caps) > 32 {
		return fmt.Errorf("at most 32 capabilities")
	}
	total := 0
	for _, c := range caps {
		total += len(c.Topics) + len(c.Rooms)
	}
	if total > MaxTotalPatterns {
		return fmt.Errorf("at most %d topic and room patterns in all, got %d", MaxTotalPatterns, total)
	}
	known := map[Op]bool{OpAll: true}
	for _, op := range AllOps {
		known[op] = true
	}
	for i, c := range caps {
		if len(c.Ops) == 0 {
			return fmt.Errorf("capabilities[%d].ops is empty", i)
		}
		for _, op := range c.Ops {
			if !known[op] {
				return fmt.Errorf("capabilities[%d]: unknown operation %q (want one of %s or *)", i, op, opList())
			}
		}
		if len(c.Topics) == 0 {
			return fmt.Errorf("capabilities[%d].topics is empty (use [\"*\"] for every topic)", i)
		}
		if len(c.Topics) > MaxPatterns || len(c.Rooms) > MaxPatterns {
			return fmt.Errorf("capabilities[%d]: at most %d topic and %d room patterns", i, MaxPatterns, MaxPatterns)
		}
		for _, p := range append(append([]string{}, c.Topics...), c.Rooms...) {
			if err := validPattern(p); err != nil {
				return fmt.Errorf("capabilities[%d]: %v", i, err)
			}
		}
	}
	return nil
}

func validPattern(p string) error {
	body, _ := strings.CutSuffix(p, "*")
	if p == "" || len(p) > 200 || strings.Contains(body, "*") {
		return fmt.Errorf("pattern %q: want a name, a prefix ending in *, or *", p)
	}
	return nil
}

func opList() string {
	s := make([]string, len(AllOps))
	for i, o := range AllOps {
		s[i] = string(o)
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// AllowsSomewhere reports whether caps grant op on at least one topic and
// room (the request's own topic and rooms are checked with Allows).
func AllowsSomewhere(caps []Capability, op Op) bool {
	for _, c := range caps {
		if hasOp(c, op) && len(c.Topics) > 0 {
			return true
		}
	}
	return false
}
