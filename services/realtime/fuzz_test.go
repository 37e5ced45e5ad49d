package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	protows "github.com/msgmesh/msgmesh/proto/ws"
)

// A position that parses prints back to a text that parses to the same
// position; nothing panics, and a parsed id never has more partitions
// than maxIDPartitions.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"3f9a1c0b7e2d4a51.120-97-0", "e.-97-", "e.5", "e.", "", ".1-2", "e.1-x", "e.99999999999999999999", "e.-", "e." + strings.Repeat("1-", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			return
		}
		if len(p.Next) > maxIDPartitions {
			t.Fatalf("%q: %d partitions", s, len(p.Next))
		}
		back, err := ParsePosition(p.String())
		if err != nil || back.Epoch != p.Epoch || len(back.Next) != len(p.Next) {
			t.Fatalf("%q → %q → %+v %v", s, p.String(), back, err)
		}
		for i := range p.Next {
			if back.Next[i] != p.Next[i] || p.Next[i] < untracked {
				t.Fatalf("%q: partition %d: %d → %d", s, i, p.Next[i], back.Next[i])
			}
		}
	})
}

// ParseStart (Last-Event-ID, ?cursor=, ?from=) never panics, and what it
// accepts is one of its three forms: a position, distinct message cursors,
// or a from.
func FuzzParseStart(f *testing.F) {
	f.Add("e.1-2", "", "")
	f.Add("", "0-5,1-7", "earliest")
	f.Add("", "0-5,0-6", "")
	f.Add("", "", "sideways")
	f.Fuzz(func(t *testing.T, lastEventID, cur, from string) {
		st, err := ParseStart(lastEventID, cur, from)
		if err != nil {
			return
		}
		if st.From != "latest" && st.From != "earliest" {
			t.Fatalf("from %q", st.From)
		}
		if st.ID != nil && st.Cursors != nil {
			t.Fatalf("both a position and cursors: %+v", st)
		}
		seen := map[int32]bool{}
		for _, c := range st.Cursors {
			if seen[c.Partition] || c.Partition < 0 || c.Offset < 0 {
				t.Fatalf("cursors %v", st.Cursors)
			}
			seen[c.Partition] = true
		}
	})
}

// newFuzzService is the one place this package's tests construct a
// Service without Kafka traffic: state has tenant "t" and no topics, so
// no subscription reaches a reader. The seed broker is never dialled.
func newFuzzService(t testing.TB, st *controlstate.State) *Service {
	t.Helper()
	authn := &auth.Authenticator{State: st}
	defaults := config.Defaults()
	s, err := New(Config{State: st, Authenticate: authn.Authenticate, TopicPrefix: "fuzz",
		Realtime: defaults.Realtime, RequestTimeout: defaults.Kafka.RequestTimeout,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}})
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.WSMaxSubscriptions = 8
	s.cfg.WSQueueFrames = 8
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func framesSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(protows.FramesSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("frames.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("frames.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// Whatever text frame a client sends, the connection answers with frames
// of proto/ws/frames.schema.json (an error names the problem), never
// panics, and keeps serving: a ping after it is answered with a pong.
func FuzzWebSocketClientFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"ping"}`,
		`{"type":"subscribe","id":"s1","topic":"orders","room":"r","cursor":"e.1-2"}`,
		`{"type":"subscribe","id":"s1","topic":"orders","from":"sideways"}`,
		`{"type":"subscribe","id":"","topic":"orders"}`,
		`{"type":"subscribe","id":"s1","topic":"orders","room":""}`,
		`{"type":"unsubscribe","id":"nope"}`,
		`{"type":"refresh","token":"a.b.c"}`,
		`{"type":"refresh","token":""}`,
		`{"type":"dance"}`,
		`[1,2,3]`, `{"type":`, `null`, `"subscribe"`, `{"type":"subscribe","room":null,"id":1}`,
	} {
		f.Add([]byte(s))
	}
	clog := controlstate.NewMemoryLog(nil)
	key, hash, display, err := auth.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	_ = key
	if _, err := clog.Append(context.Background(), controlstate.TypeTenantCreated, controlstate.TenantCreatedData{Tenant: "t", Plan: controlstate.PlanFree,
		AdminKey: &controlstate.KeyCreatedData{Tenant: "t", KeyID: "key_a", Name: "a", Role: "admin", Hash: hash, Prefix: display}}); err != nil {
		f.Fatal(err)
	}
	s := newFuzzService(f, clog.State())
	schema := framesSchema(f)
	principal, err := s.authenticate(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, stop := context.WithCancel(s.ctx)
		defer stop()
		wc := &wsConn{s: s, ctx: ctx, stop: stop, principal: principal, cred: key,
			subs: map[string]*wsSub{}, authMoved: make(chan struct{}, 1),
			ctrl: make(chan []byte, 64), notify: make(chan struct{}, 1), catchups: make(chan struct{}, wsConnCatchups)}
		wc.frame(data)
		wc.frame([]byte(`{"type":"ping"}`))
		wc.wg.Wait()
		var last map[string]any
		for n := len(wc.ctrl); n > 0; n-- {
			b := <-wc.ctrl
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("frame %q is not JSON: %v", b, err)
			}
			if err := schema.Validate(v); err != nil {
				t.Fatalf("answer to %q: frame %s does not match frames.schema.json: %v", data, b, err)
			}
			last = nil
			_ = json.Unmarshal(b, &last)
		}
		if last["type"] != "pong" {
			t.Fatalf("after %q the ping was answered %v, want pong last", data, last)
		}
	})
}
