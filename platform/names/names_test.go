package names

import "testing"

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
