package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs, _, _, _, _ := serveFlags()
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// Flags beat MSGMESH_* variables, which beat the file, which beats defaults.
func TestLoadPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "msgmesh.yaml")
	if err := os.WriteFile(file, []byte("http:\n  addr: 127.0.0.1:1111\nlog:\n  level: warn\npoll:\n  max_wait: 7s\ndata_dir: /from/file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MSGMESH_HTTP_ADDR", "127.0.0.1:2222")
	t.Setenv("MSGMESH_LOG_LEVEL", "error")
	t.Setenv("MSGMESH_KAFKA_BROKERS", "a:1,b:2")
	t.Setenv("MSGMESH_POLL_CONSUMER_IDLE_TIMEOUT", "3s")
	cfg, err := load(flags(t, "--http.addr=127.0.0.1:3333"), file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Addr != "127.0.0.1:3333" {
		t.Errorf("http.addr = %s, want the flag's", cfg.HTTP.Addr)
	}
	if cfg.Log.Level != "error" {
		t.Errorf("log.level = %s, want the env's", cfg.Log.Level)
	}
	if cfg.Poll.MaxWait != 7*time.Second || cfg.DataDir != "/from/file" {
		t.Errorf("file values lost: max_wait %v data_dir %s", cfg.Poll.MaxWait, cfg.DataDir)
	}
	if cfg.Poll.ConsumerIdleTimeout != 3*time.Second {
		t.Errorf("poll.consumer_idle_timeout = %v, want 3s from env", cfg.Poll.ConsumerIdleTimeout)
	}
	if strings.Join(cfg.Kafka.Brokers, ",") != "a:1,b:2" || cfg.Embedded() {
		t.Errorf("kafka.brokers = %v", cfg.Kafka.Brokers)
	}
	if cfg.Topics.DefaultPartitions != 3 {
		t.Errorf("default lost: topics.default_partitions = %d", cfg.Topics.DefaultPartitions)
	}
}

func TestEmptyBrokersMeansEmbedded(t *testing.T) {
	t.Setenv("MSGMESH_KAFKA_BROKERS", "")
	cfg, err := load(flags(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Embedded() {
		t.Fatalf("brokers %v, want embedded", cfg.Kafka.Brokers)
	}
}

func TestVerifyConfigReportsEveryError(t *testing.T) {
	t.Setenv("MSGMESH_HTTP_ADDR", "nope")
	t.Setenv("MSGMESH_LOG_LEVEL", "loud")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, k := range []string{"http.addr", "log.level"} {
		if !strings.Contains(errb.String(), k) {
			t.Errorf("stderr does not name %s:\n%s", k, errb.String())
		}
	}
}

func TestVerifyConfigMasksSecrets(t *testing.T) {
	key := "mm_" + strings.Repeat("A", 43)
	t.Setenv("MSGMESH_BOOTSTRAP_ADMIN_KEY", key)
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), key) || !strings.Contains(out.String(), "bootstrap_admin_key = (set)") {
		t.Fatalf("secret not masked:\n%s", out.String())
	}
}

func TestUnknownTargetAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--target=nope", "--verify-config=false"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown target") {
		t.Fatalf("exit %d stderr %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "msgmesh ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"serve", "--list-targets"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "gateway") {
		t.Fatalf("list-targets: %d %q", code, out.String())
	}
}

// The key-encryption key is masked; previous key files split on commas;
// a key that is not 32 bytes is a configuration error naming secrets.key.
func TestSecretsConfig(t *testing.T) {
	key := "q1bZ0mW5dP1n8QyF3v6s2Yk4xR7uT9aL0cE2hJ5gN8o="
	t.Setenv("MSGMESH_SECRETS_KEY", key)
	t.Setenv("MSGMESH_SECRETS_PREVIOUS_KEY_FILES", "/k/a.key, /k/b.key")
	cfg, err := load(flags(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Secrets.Key != key || len(cfg.Secrets.PreviousKeyFiles) != 2 || cfg.Secrets.PreviousKeyFiles[1] != "/k/b.key" {
		t.Fatalf("secrets config %+v", cfg.Secrets)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), key) || !strings.Contains(out.String(), "secrets.key = (set)") {
		t.Fatalf("secrets.key not masked:\n%s", out.String())
	}
	t.Setenv("MSGMESH_SECRETS_KEY", "c2hvcnQ=")
	out.Reset()
	errb.Reset()
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "secrets.key") {
		t.Fatalf("a short key: exit %d: %s", code, errb.String())
	}
}

// msgmesh secrets new-key writes a 0600 key file and prints the id a node
// would name; key-id prints the same id; an existing file is never
// overwritten.
func TestSecretsCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.key")
	var out, errb bytes.Buffer
	if code := run([]string{"secrets", "new-key", path}, &out, &errb); code != 0 {
		t.Fatalf("new-key: exit %d %s", code, errb.String())
	}
	id := strings.TrimSpace(out.String())
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || !strings.HasPrefix(id, "kek_") {
		t.Fatalf("new-key: %v %v %q", fi, err, id)
	}
	before, _ := os.ReadFile(path)
	out.Reset()
	if code := run([]string{"secrets", "key-id", path}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != id {
		t.Fatalf("key-id: exit %d %q, want %s", code, out.String(), id)
	}
	if code := run([]string{"secrets", "new-key", path}, &out, &errb); code != 1 {
		t.Fatalf("new-key over an existing file: exit %d", code)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the key file was overwritten")
	}
	if code := run([]string{"secrets"}, &out, &errb); code != 2 {
		t.Fatalf("no subcommand: exit %d", code)
	}
}
