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
