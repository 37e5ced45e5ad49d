package config

import (
	"strings"
	"testing"
)

func TestDefaultsValid(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestValidateJoinsEveryError(t *testing.T) {
	c := Defaults()
	c.HTTP.Addr = "nope"
	c.Log.Level = "loud"
	c.Topics.DefaultPartitions = 0
	c.BootstrapAdminKey = "short"
	err := c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, key := range []string{"http.addr", "log.level", "topics.default_partitions", "bootstrap_admin_key"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

// Every key has a meaning for --help and the README (add new keys to
// settingDocs in settings.go), and no meaning is left for a key that went.
func TestEverySettingDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings() {
		seen[s.Key] = true
		if s.Doc == "" {
			t.Errorf("setting %s has no entry in settingDocs (platform/config/settings.go)", s.Key)
		}
		if s.Env != EnvName(s.Key) || !strings.HasPrefix(s.Env, "MSGMESH_") {
			t.Errorf("setting %s: env %s", s.Key, s.Env)
		}
	}
	for k := range settingDocs {
		if !seen[k] {
			t.Errorf("settingDocs documents %s, which is no setting", k)
		}
	}
	if EnvName("poll.max_wait") != "MSGMESH_POLL_MAX_WAIT" {
		t.Fatal(EnvName("poll.max_wait"))
	}
}

// Errors come in key order whatever the map iteration order, each naming
// key and variable.
func TestValidateOrderStable(t *testing.T) {
	c := Defaults()
	c.Webhooks.Concurrency = 0
	c.Realtime.Heartbeat = 0
	c.HTTP.IdleTimeout = 0
	c.Poll.MaxConsumers = 0
	first := c.Validate().Error()
	for i := 0; i < 20; i++ {
		if got := c.Validate().Error(); got != first {
			t.Fatalf("order changed:\n%s\nthen\n%s", first, got)
		}
	}
	want := "http.idle_timeout (MSGMESH_HTTP_IDLE_TIMEOUT): must be a positive duration, got 0s\n" +
		"poll.max_consumers (MSGMESH_POLL_MAX_CONSUMERS): must be positive, got 0\n" +
		"realtime.heartbeat (MSGMESH_REALTIME_HEARTBEAT): must be a positive duration, got 0s\n" +
		"webhooks.concurrency (MSGMESH_WEBHOOKS_CONCURRENCY): must be positive, got 0"
	if first != want {
		t.Fatalf("got\n%s\nwant\n%s", first, want)
	}
}
