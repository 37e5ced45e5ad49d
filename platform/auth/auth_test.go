package auth

import (
	"testing"
)

func TestNewKeyShape(t *testing.T) {
	k1, h1, d1, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _, _, _ := NewKey()
	if k1 == k2 {
		t.Fatal("two keys alike")
	}
	if !LooksLikeKey(k1) || len(k1) != 3+43 {
		t.Fatalf("key shape %q", k1)
	}
	if HashKey(k1) != h1 || len(h1) != 64 {
		t.Fatalf("hash %q", h1)
	}
	if d1 != k1[:9] {
		t.Fatalf("display %q", d1)
	}
}

func TestRoles(t *testing.T) {
	cases := []struct {
		role string
		op   Op
		want bool
	}{
		{RoleAdmin, OpKeysManage, true}, {RoleAdmin, OpPoll, true},
		{RoleProducer, OpPublish, true}, {RoleProducer, OpPoll, false}, {RoleProducer, OpTopicsManage, false},
		{RoleConsumer, OpPoll, true}, {RoleConsumer, OpPublish, false}, {RoleConsumer, OpKeysManage, false},
	}
	for _, c := range cases {
		if got := (Principal{Tenant: "t", Role: c.role}).Allows(c.op); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.role, c.op, got, c.want)
		}
	}
	if (Principal{Operator: true}).Allows(OpPublish) {
		t.Error("operator may publish into tenants")
	}
}
