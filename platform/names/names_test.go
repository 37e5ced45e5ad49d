package names

import (
	"strings"
	"testing"
)

func TestTopicRules(t *testing.T) {
	for _, ok := range []string{"orders", "chat_1", "A-b", "x"} {
		if err := Topic(ok); err != nil {
			t.Errorf("Topic(%q) = %v, want ok", ok, err)
		}
	}
	long := make([]byte, 101)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "a.b", "a/b", "..", "a b", "é", string(long), "wh", "dlq"} {
		if err := Topic(bad); err == nil {
			t.Errorf("Topic(%q) accepted", bad)
		}
	}
}

func TestTenantRules(t *testing.T) {
	if err := Tenant("acme-1"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "-a", "_x", "Acme", "a.b", "a_b"} {
		if Tenant(bad) == nil {
			t.Errorf("Tenant(%q) accepted", bad)
		}
	}
}

func TestMapperRoundTrip(t *testing.T) {
	m := Mapper{Prefix: "msgmesh"}
	kt := m.KafkaTopic("acme", "orders")
	if kt != "msgmesh.acme.orders" {
		t.Fatalf("KafkaTopic = %q", kt)
	}
	if g := m.Group("acme", "orders", "g1"); g != "msgmesh.acme.orders.g1" {
		t.Fatalf("Group = %q", g)
	}
	tn, tp, ok := m.SplitKafkaTopic(kt)
	if !ok || tn != "acme" || tp != "orders" {
		t.Fatalf("SplitKafkaTopic = %q %q %v", tn, tp, ok)
	}
	if _, _, ok := m.SplitKafkaTopic(m.ControlTopic()); ok {
		t.Fatal("control topic parsed as a tenant topic")
	}
}

// Kafka reads "." and "_" alike: no tenant topic may take the place of
// one of MsgMesh's own topics, whatever the tenant.
func TestTenantTopicsCannotCollideWithInternalTopics(t *testing.T) {
	m := Mapper{Prefix: "msgmesh"}
	if !Collide("msgmesh.acme.wh_retry", "msgmesh.acme.wh.retry") || Collide("msgmesh.acme.orders", "msgmesh.acme.orders2") {
		t.Fatal("Collide does not follow Kafka's rule")
	}
	for _, tenant := range []string{"acme", "a-b", "0"} {
		for _, internal := range m.InternalTopics(tenant) {
			// The tenant topic whose Kafka name collides with internal.
			rest, ok := strings.CutPrefix(internal, m.Prefix+"."+tenant+".")
			if !ok {
				continue // process-wide: no tenant id starts with "_"
			}
			for _, name := range []string{rest, strings.ReplaceAll(rest, ".", "_")} {
				if Topic(name) == nil {
					t.Errorf("tenant topic %q accepted; its Kafka topic %s collides with %s", name, m.KafkaTopic(tenant, name), internal)
				}
			}
		}
	}
	for _, bad := range []string{"wh_retry", "wh_x", "dlq_1", "wh_attempt_log", "wh_attempts"} {
		err := Topic(bad)
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("Topic(%q) = %v, want reserved", bad, err)
		}
	}
	for _, ok := range []string{"whx", "wh-retry", "dlqs", "my_wh_retry", "WH_retry"} {
		if err := Topic(ok); err != nil {
			t.Errorf("Topic(%q) = %v, want ok", ok, err)
		}
	}
}

func TestAttemptLogTopic(t *testing.T) {
	m := Mapper{Prefix: "msgmesh"}
	if got := m.AttemptLogTopic("acme"); got != "msgmesh.acme.wh.attempt_log" {
		t.Fatalf("AttemptLogTopic = %q", got)
	}
	if Collide(m.AttemptLogTopic("acme"), m.AttemptsTopic("acme")) {
		t.Fatal("the attempt log collides with the attempts topic")
	}
	if tenant, ok := m.SplitAttemptLogTopic("msgmesh.a-b.wh.attempt_log"); !ok || tenant != "a-b" {
		t.Fatalf("SplitAttemptLogTopic = %q, %v", tenant, ok)
	}
	for _, other := range []string{"msgmesh.acme.wh.attempts", "msgmesh.acme.orders", "other.acme.wh.attempt_log", "msgmesh.A.wh.attempt_log", "msgmesh..wh.attempt_log"} {
		if _, ok := m.SplitAttemptLogTopic(other); ok {
			t.Errorf("SplitAttemptLogTopic(%q) accepted", other)
		}
	}
}

// TestMapperTable pins every Kafka topic and group name MsgMesh makes:
// operators' ACLs and dashboards rely on them.
func TestMapperTable(t *testing.T) {
	m := Mapper{Prefix: "msgmesh"}
	for got, want := range map[string]string{
		m.KafkaTopic("acme", "orders"):       "msgmesh.acme.orders",
		m.Group("acme", "orders", "billing"): "msgmesh.acme.orders.billing",
		m.ControlTopic():                     "msgmesh.__control",
		m.UsageTopic():                       "msgmesh.__usage",
		m.WebhookGroup("acme", "wh_1"):       "msgmesh.acme.wh.wh_1",
		m.InspectGroup("acme", "wh_1"):       "msgmesh.acme.wh.wh_1.dlq-inspect",
		m.ReplayGroup("acme", "wh_1"):        "msgmesh.acme.wh.wh_1.dlq-replay",
		m.RetryTopic("acme"):                 "msgmesh.acme.wh.retry",
		m.DLQTopic("acme"):                   "msgmesh.acme.dlq",
		m.AttemptsTopic("acme"):              "msgmesh.acme.wh.attempts",
		m.AttemptLogTopic("acme"):            "msgmesh.acme.wh.attempt_log",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
