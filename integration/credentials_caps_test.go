package integration

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// credCall is one request of a capability table: who sends it, what, and
// the expected answer. A 403 must be code forbidden and its error must
// name every string of mention.
type credCall struct {
	who     string
	method  string
	path    string
	body    any
	status  int
	mention []string
}

func credRun(t *testing.T, base string, keys map[string]string, calls []credCall) {
	t.Helper()
	for _, cl := range calls {
		what := cl.who + " " + cl.method + " " + cl.path
		if b, err := json.Marshal(cl.body); err == nil && cl.body != nil {
			what += " " + string(b)
		}
		key, ok := keys[cl.who]
		if !ok {
			t.Fatalf("table names unknown key %q", cl.who)
		}
		r := h.Do(t, base, cl.method, cl.path, key, cl.body)
		if cl.status == http.StatusForbidden {
			h.WantForbidden(t, what, r, cl.mention...)
			continue
		}
		if r.Status != cl.status {
			t.Errorf("%s: status %d, want %d: %s", what, r.Status, cl.status, r.Body)
		}
	}
}

func credMsg(room string, data any) map[string]any {
	m := map[string]any{"data": data}
	if room != "" {
		m["room"] = room
	}
	return m
}

// Capability keys: operations × topics × rooms, allowed and refused,
// through the HTTP API. Every refusal is 403 forbidden naming what was
// refused, and a refused publish writes nothing to Kafka.
func TestCredentialsCapabilityTable(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	admin := c.AdminKey
	for _, tp := range []string{"chat", "chat-a", "chat-b", "orders", "other", "tmp-keep"} {
		h.CreateTopic(t, n.URL, admin, tp, 1)
	}
	// Something to poll on orders.
	h.Must(t, n.URL, "POST", "/v1/topics/orders/messages", admin, credMsg("", "order-1"), 200)

	keys := map[string]string{}
	ids := map[string]string{}
	mk := func(name string, caps ...h.Cap) {
		ids[name], keys[name] = h.CapKey(t, n.URL, admin, name, caps...)
	}
	mk("room42", h.Cap{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}})
	mk("chatstar", h.Cap{Ops: []string{"publish", "subscribe"}, Topics: []string{"chat-*"}})
	mk("pollorders", h.Cap{Ops: []string{"poll"}, Topics: []string{"orders"}})
	mk("tmpmgr", h.Cap{Ops: []string{"topics.manage"}, Topics: []string{"tmp-*"}})
	mk("keysmgr", h.Cap{Ops: []string{"keys.manage"}, Topics: []string{"*"}})
	mk("keyschat", h.Cap{Ops: []string{"keys.manage", "tokens.mint"}, Topics: []string{"chat"}})
	mk("minter", h.Cap{Ops: []string{"tokens.mint"}, Topics: []string{"*"}},
		h.Cap{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42", "vip-*"}})
	mk("reader", h.Cap{Ops: []string{"topics.read"}, Topics: []string{"chat-*"}})
	mk("settings", h.Cap{Ops: []string{"tenant.settings"}, Topics: []string{"*"}})
	keys["admin"] = admin
	// A victim for the revoke row of keysmgr: a key within keysmgr's own
	// capabilities (a broader one it may not revoke: see below).
	victimID, _ := h.CapKey(t, n.URL, admin, "victim", h.Cap{Ops: []string{"keys.manage"}, Topics: []string{"*"}})
	broaderID, _ := h.RoleKey(t, n.URL, admin, "broader", "consumer")

	chatKT := c.TenantKafkaTopic("default", "chat")
	before := h.TotalRecords(t, c.Brokers, chatKT)

	F := http.StatusForbidden
	credRun(t, n.URL, keys, []credCall{
		// publish on chat, room-42 only.
		{"room42", "POST", "/v1/topics/chat/messages", credMsg("room-42", 1), 200, nil},
		{"room42", "POST", "/v1/topics/chat/messages", credMsg("room-43", 1), F, []string{"publish", `"chat"`, `"room-43"`}},
		{"room42", "POST", "/v1/topics/chat/messages", credMsg("room-4", 1), F, []string{"publish", `"room-4"`}},
		{"room42", "POST", "/v1/topics/chat/messages", credMsg("", 1), F, []string{"publish", `"chat"`, "every room"}},
		{"room42", "POST", "/v1/topics/chat/messages", map[string]any{"messages": []any{credMsg("room-42", 1), credMsg("room-42", 2)}}, 200, nil},
		{"room42", "POST", "/v1/topics/chat/messages", map[string]any{"messages": []any{credMsg("room-42", 1), credMsg("room-43", 2)}}, F, []string{"publish", `"room-43"`}},
		{"room42", "POST", "/v1/topics/chat/messages", map[string]any{"messages": []any{credMsg("room-42", 1), credMsg("", 2)}}, F, []string{"publish", "every room"}},
		{"room42", "POST", "/v1/topics/orders/messages", credMsg("room-42", 1), F, []string{"publish", `"orders"`}},
		{"room42", "POST", "/v1/topics/chat-a/messages", credMsg("room-42", 1), F, []string{"publish", `"chat-a"`}},
		{"room42", "POST", "/v1/topics/chat/poll", map[string]any{"group": "g"}, F, []string{"poll", `"chat"`}},
		{"room42", "POST", "/v1/topics/chat/commit", map[string]any{"group": "g", "cursors": []string{"0-0"}}, F, []string{"poll", `"chat"`}},
		{"room42", "GET", "/v1/topics", nil, F, []string{"topics.read"}},
		{"room42", "GET", "/v1/topics/chat", nil, F, []string{"topics.read", `"chat"`}},
		{"room42", "POST", "/v1/topics", map[string]any{"name": "chat-new"}, F, []string{"topics.manage"}},
		{"room42", "DELETE", "/v1/topics/chat", nil, F, []string{"topics.manage", `"chat"`}},
		{"room42", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},
		{"room42", "POST", "/v1/keys", map[string]any{"name": "x", "capabilities": []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}}}, F, []string{"keys.manage"}},
		{"room42", "DELETE", "/v1/keys/" + victimID, nil, F, []string{"keys.manage"}},
		{"room42", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60}, F, []string{"tokens.mint"}},
		{"room42", "PATCH", "/v1/tenant", map[string]any{"strict_topics": false}, F, []string{"tenant.settings"}},

		// publish + subscribe on chat-*, every room.
		{"chatstar", "POST", "/v1/topics/chat-a/messages", credMsg("any-room", 1), 200, nil},
		{"chatstar", "POST", "/v1/topics/chat-b/messages", credMsg("", 1), 200, nil},
		{"chatstar", "POST", "/v1/topics/chat/messages", credMsg("room-42", 1), F, []string{"publish", `"chat"`}},
		{"chatstar", "POST", "/v1/topics/orders/messages", credMsg("", 1), F, []string{"publish", `"orders"`}},
		{"chatstar", "POST", "/v1/topics/chat-a/poll", map[string]any{"group": "g"}, F, []string{"poll", `"chat-a"`}},
		{"chatstar", "GET", "/v1/topics/chat-a", nil, F, []string{"topics.read"}},
		{"chatstar", "POST", "/v1/topics", map[string]any{"name": "chat-c"}, F, []string{"topics.manage"}},
		{"chatstar", "POST", "/v1/tokens", nil, F, []string{"tokens.mint"}},

		// poll on orders.
		{"pollorders", "POST", "/v1/topics/chat/poll", map[string]any{"group": "g"}, F, []string{"poll", `"chat"`}},
		{"pollorders", "POST", "/v1/topics/orders/messages", credMsg("", 1), F, []string{"publish", `"orders"`}},
		{"pollorders", "GET", "/v1/topics/orders", nil, F, []string{"topics.read", `"orders"`}},
		{"pollorders", "DELETE", "/v1/topics/orders", nil, F, []string{"topics.manage", `"orders"`}},

		// topics.manage on tmp-*.
		{"tmpmgr", "POST", "/v1/topics", map[string]any{"name": "tmp-1"}, 201, nil},
		{"tmpmgr", "POST", "/v1/topics", map[string]any{"name": "other-1"}, F, []string{"topics.manage", `"other-1"`}},
		{"tmpmgr", "POST", "/v1/topics", map[string]any{"name": "tmp"}, F, []string{"topics.manage", `"tmp"`}},
		{"tmpmgr", "DELETE", "/v1/topics/tmp-1", nil, 204, nil},
		{"tmpmgr", "DELETE", "/v1/topics/chat", nil, F, []string{"topics.manage", `"chat"`}},
		{"tmpmgr", "GET", "/v1/topics/tmp-keep", nil, F, []string{"topics.read", `"tmp-keep"`}},
		{"tmpmgr", "GET", "/v1/topics", nil, F, []string{"topics.read"}},
		{"tmpmgr", "POST", "/v1/topics/tmp-keep/messages", credMsg("", 1), F, []string{"publish", `"tmp-keep"`}},
		{"tmpmgr", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},

		// keys.manage on every topic: keys, but nothing else; new keys only narrow.
		{"keysmgr", "GET", "/v1/keys", nil, 200, nil},
		{"keysmgr", "POST", "/v1/keys", map[string]any{"name": "k2", "capabilities": []h.Cap{{Ops: []string{"keys.manage"}, Topics: []string{"*"}}}}, 201, nil},
		{"keysmgr", "POST", "/v1/keys", map[string]any{"name": "k3", "role": "producer"}, F, []string{"publish"}},
		{"keysmgr", "POST", "/v1/keys", map[string]any{"name": "k4", "capabilities": []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}}}}, F, []string{"publish", `"chat"`}},
		{"keysmgr", "POST", "/v1/keys", map[string]any{"name": "k5", "role": "admin"}, F, nil},
		{"keysmgr", "DELETE", "/v1/keys/" + broaderID, nil, F, []string{"broader than itself"}},
		{"keysmgr", "DELETE", "/v1/keys/" + victimID, nil, 204, nil},
		{"keysmgr", "POST", "/v1/topics/chat/messages", credMsg("room-42", 1), F, []string{"publish"}},
		{"keysmgr", "POST", "/v1/tokens", nil, F, []string{"tokens.mint"}},
		{"keysmgr", "GET", "/v1/topics", nil, F, []string{"topics.read"}},
		{"keysmgr", "PATCH", "/v1/tenant", map[string]any{"strict_topics": false}, F, []string{"tenant.settings"}},

		// keys.manage and tokens.mint are tenant-wide: on one topic they grant nothing.
		{"keyschat", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},
		{"keyschat", "POST", "/v1/keys", map[string]any{"name": "k6", "capabilities": []h.Cap{{Ops: []string{"keys.manage"}, Topics: []string{"chat"}}}}, F, []string{"keys.manage"}},
		{"keyschat", "POST", "/v1/tokens", nil, F, []string{"tokens.mint"}},

		// tokens.mint: tokens, nothing of keys or topics.
		{"minter", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60}, 200, nil},
		{"minter", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60, "capabilities": []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"vip-7"}}}}, 200, nil},
		{"minter", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60, "capabilities": []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"room-43"}}}}, F, []string{"publish", `"room-43"`}},
		{"minter", "POST", "/v1/tokens", map[string]any{"ttl_seconds": 60, "capabilities": []h.Cap{{Ops: []string{"publish"}, Topics: []string{"chat"}, Rooms: []string{"vip*"}}}}, F, []string{"publish", `"vip*"`}},
		{"minter", "POST", "/v1/topics/chat/messages", credMsg("vip-1", 1), 200, nil},
		{"minter", "POST", "/v1/topics/chat/messages", credMsg("vipx", 1), F, []string{"publish", `"vipx"`}},
		{"minter", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},
		{"minter", "POST", "/v1/topics", map[string]any{"name": "minted"}, F, []string{"topics.manage"}},

		// topics.read on chat-*.
		{"reader", "GET", "/v1/topics/chat-a", nil, 200, nil},
		{"reader", "GET", "/v1/topics/orders", nil, F, []string{"topics.read", `"orders"`}},
		{"reader", "GET", "/v1/topics/chat", nil, F, []string{"topics.read", `"chat"`}},
		{"reader", "POST", "/v1/topics/chat-a/messages", credMsg("", 1), F, []string{"publish"}},

		// tenant.settings.
		{"settings", "PATCH", "/v1/tenant", map[string]any{"strict_topics": true}, 200, nil},
		{"settings", "GET", "/v1/keys", nil, F, []string{"keys.manage"}},
	})

	// Raw-body publishing carries the room in ?room= and is checked alike.
	raw := func(who, room string) h.Response {
		path := "/v1/topics/chat/messages"
		if room != "" {
			path += "?room=" + room
		}
		return h.Do(t, n.URL, "POST", path, keys[who], []byte("raw-bytes"), "text/plain")
	}
	if r := raw("room42", "room-42"); r.Status != 200 {
		t.Errorf("room42 raw publish to room-42: %d %s", r.Status, r.Body)
	}
	h.WantForbidden(t, "room42 raw publish to room-7", raw("room42", "room-7"), "publish", `"room-7"`)
	h.WantForbidden(t, "room42 raw publish without a room", raw("room42", ""), "publish", "every room")

	// Kafka holds exactly the allowed chat publishes: 1 + 2 (batch) + 1
	// (minter vip-1) + 1 raw; every refused one, batches included, wrote
	// nothing.
	if got := h.TotalRecords(t, c.Brokers, chatKT) - before; got != 5 {
		t.Errorf("chat gained %d records in Kafka, want exactly the 5 allowed publishes", got)
	}
	rooms := map[string]int{}
	for _, recs := range h.ReadByOffset(t, c.Brokers, chatKT) {
		for _, r := range recs {
			rooms[string(r.Key)]++
		}
	}
	for room := range rooms {
		if room != "room-42" && room != "vip-1" {
			t.Errorf("chat holds a record in room %q, which no credential was allowed to publish to", room)
		}
	}

	// poll and commit on orders (the allowed side of pollorders).
	pr := h.Must(t, n.URL, "POST", "/v1/topics/orders/poll", keys["pollorders"], map[string]any{"group": "caps", "wait_ms": 10000}, 200)
	var polled struct {
		Messages []h.Msg `json:"messages"`
	}
	if err := json.Unmarshal(pr.Body, &polled); err != nil || len(polled.Messages) != 1 {
		t.Fatalf("pollorders polled %s, want the one order", pr.Body)
	}
	h.Must(t, n.URL, "POST", "/v1/topics/orders/commit", keys["pollorders"], map[string]any{"group": "caps", "cursors": []string{polled.Messages[0].Cursor}}, 204)

	// topics.read on chat-* lists only chat-* topics.
	lr := h.Must(t, n.URL, "GET", "/v1/topics", keys["reader"], nil, 200)
	var listed struct {
		Topics []struct{ Name string } `json:"topics"`
	}
	_ = json.Unmarshal(lr.Body, &listed)
	var names []string
	for _, tp := range listed.Topics {
		names = append(names, tp.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "chat-a,chat-b" {
		t.Errorf("reader (topics.read on chat-*) lists %v, want [chat-a chat-b]", names)
	}

	// tmp-1 is gone and other-1 never was.
	h.WantError(t, "deleted tmp-1", h.Do(t, n.URL, "GET", "/v1/topics/tmp-1", admin, nil), 404, "topic_not_found")
	h.WantError(t, "refused other-1", h.Do(t, n.URL, "GET", "/v1/topics/other-1", admin, nil), 404, "topic_not_found")
	// The revoked victim is revoked; the key listing holds no plaintext.
	kl := h.Must(t, n.URL, "GET", "/v1/keys", keys["keysmgr"], nil, 200)
	for who, k := range keys {
		if strings.Contains(string(kl.Body), k) {
			t.Errorf("GET /v1/keys holds the plaintext of %s", who)
		}
	}
	var kls struct {
		Keys []struct {
			ID           string  `json:"id"`
			RevokedAt    *string `json:"revoked_at"`
			Capabilities []h.Cap `json:"capabilities"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(kl.Body, &kls)
	seen := 0
	for _, k := range kls.Keys {
		switch k.ID {
		case victimID:
			seen++
			if k.RevokedAt == nil {
				t.Errorf("victim key listed without revoked_at after keysmgr revoked it")
			}
		case ids["room42"]:
			seen++
			if len(k.Capabilities) != 1 || strings.Join(k.Capabilities[0].Rooms, ",") != "room-42" {
				t.Errorf("room42 key listed with capabilities %+v", k.Capabilities)
			}
		}
	}
	if seen != 2 {
		t.Errorf("GET /v1/keys did not list the victim and room42 keys: %s", kl.Body)
	}
}
