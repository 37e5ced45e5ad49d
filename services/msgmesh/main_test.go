package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/msgmesh/msgmesh/platform/config"
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

// Issue 18 item 4: every error at once, by key, variable and value, in a
// stable order; what serve would refuse at start (a port that is not a
// number) is refused here already.
func TestVerifyConfigNamesEveryBadValue(t *testing.T) {
	t.Setenv("MSGMESH_POLL_MAX_WAIT", "abc")
	t.Setenv("MSGMESH_REALTIME_MAX_SUBSCRIBERS", "lots")
	t.Setenv("MSGMESH_LOG_LEVEL", "loud")
	args := []string{"serve", "--verify-config", "--http.addr=:abc", "--webhooks.max_attempts=12"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s%s", code, out.String(), errb.String())
	}
	want := []string{
		`http.addr (MSGMESH_HTTP_ADDR): want a port number 0..65535, got "abc" in ":abc"`,
		`log.level (MSGMESH_LOG_LEVEL): want debug, info, warn or error, got "loud"`,
		`poll.max_wait (MSGMESH_POLL_MAX_WAIT): want a duration such as 500ms, 30s, 1m30s or 24h, got "abc"`,
		`realtime.max_subscribers (MSGMESH_REALTIME_MAX_SUBSCRIBERS): want an integer, got "lots"`,
		`webhooks.max_attempts (MSGMESH_WEBHOOKS_MAX_ATTEMPTS): want 1..9 (the spec's single-digit retry count), got 12`,
	}
	got := errb.String()
	last := -1
	for _, w := range want {
		i := strings.Index(got, w)
		if i < 0 {
			t.Errorf("stderr lacks %q:\n%s", w, got)
			continue
		}
		if i < last {
			t.Errorf("%q out of key order:\n%s", w, got)
		}
		last = i
	}
	if n := strings.Count(got, "\n  "); n != len(want) {
		t.Errorf("%d problems reported, want exactly %d (no noise from the keys that failed):\n%s", n, len(want), got)
	}
	for i := 0; i < 5; i++ {
		var again bytes.Buffer
		run(args, &bytes.Buffer{}, &again)
		if again.String() != got {
			t.Fatalf("order not stable:\n%s\nthen\n%s", got, again.String())
		}
	}
	// And serve itself refuses the same, before it starts anything.
	errb.Reset()
	if code := run([]string{"serve", "--http.addr=:abc"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), want[0]) {
		t.Fatalf("serve --http.addr=:abc: exit %d, stderr %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"serve", "--verify-config", "--kafka.brokers=k1:9092,k2:x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `kafka.brokers (MSGMESH_KAFKA_BROKERS): want a port number 1..65535, got "x" in "k2:x"`) {
		t.Fatalf("bad broker port: exit %d, stderr %s", code, errb.String())
	}
}

// A MSGMESH_* variable that matches no setting is reported (with the
// setting it probably meant), not silently ignored.
func TestUnknownEnvReported(t *testing.T) {
	t.Setenv("MSGMESH_POLL_MAXWAIT", "3s")
	t.Setenv("MSGMESH_NOPE", "1")
	t.Setenv("MSGMESH_TEST_ANYTHING", "1")
	t.Setenv("MSGMESH_KEY", "mm_cli_key")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"MSGMESH_POLL_MAXWAIT matches no setting and is ignored (did you mean MSGMESH_POLL_MAX_WAIT?)", "MSGMESH_NOPE matches no setting"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, errb.String())
		}
	}
	for _, no := range []string{"MSGMESH_TEST_ANYTHING", "MSGMESH_KEY"} {
		if strings.Contains(errb.String(), no) {
			t.Errorf("%s reported, but it is not a serve setting by design:\n%s", no, errb.String())
		}
	}
}

// serve --help lists every setting with its default, variable and meaning,
// and each is a flag too.
func TestServeHelpListsEverySetting(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	for _, s := range config.Settings() {
		var line string
		for _, l := range lines {
			if strings.Contains(l, "--"+s.Key+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("--help does not list %s", s.Key)
			continue
		}
		if !strings.Contains(line, "("+s.Env+")") || !strings.Contains(line, s.Doc) {
			t.Errorf("--help line of %s lacks its variable or meaning: %s", s.Key, line)
		}
		if s.Default != "" && s.Default != "false" && !strings.Contains(line, "(default ") {
			t.Errorf("--help line of %s lacks its default %s: %s", s.Key, s.Default, line)
		}
	}
	cfg, err := load(flags(t, "--poll.max_wait=7s", "--webhooks.unsafe_allow_private_targets", "--limits.paid.requests_per_second=2.5"), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Poll.MaxWait != 7*time.Second || !cfg.Webhooks.UnsafeAllowPrivateTargets || cfg.Limits.Paid.RequestsPerSecond != 2.5 {
		t.Fatalf("flags not applied: %v %v %v", cfg.Poll.MaxWait, cfg.Webhooks.UnsafeAllowPrivateTargets, cfg.Limits.Paid.RequestsPerSecond)
	}
}

// The README's settings table names every key.
func TestREADMEListsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Settings() {
		if !strings.Contains(string(readme), "`"+s.Key+"`") {
			t.Errorf("README.md's Configuration table lacks `%s`", s.Key)
		}
	}
}

// The README sends a new user to every SDK's own README (each has the
// install steps and the quick start) and does not call a shipped part of
// the product a plan.
func TestREADMELinksEverySDK(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("../../sdks/*/README.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no sdks/*/README.md found (%v)", err)
	}
	for _, d := range docs {
		link := "(" + strings.TrimPrefix(filepath.ToSlash(d), "../../") + ")"
		if !strings.Contains(string(readme), link) {
			t.Errorf("README.md does not link %s", link)
		}
	}
	if strings.Contains(string(readme), "on the roadmap") {
		t.Errorf("README.md still calls something shipped \"on the roadmap\"")
	}
}

// The file's values go through the same checks: a bad duration there is
// named like one from a variable, and a key that matches no setting is an
// error; repeated list flags collect.
func TestLoadFileErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "msgmesh.yaml")
	if err := os.WriteFile(file, []byte("poll:\n  max_wait: soon\n  maxwait: 3s\nrealtime:\n  heartbeat: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := load(flags(t), file)
	if err == nil {
		t.Fatal("want errors")
	}
	for _, w := range []string{`poll.max_wait (MSGMESH_POLL_MAX_WAIT): want a duration such as 500ms, 30s, 1m30s or 24h, got "soon"`, `"poll.maxwait" matches no setting`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	cfg, err := load(flags(t, "--kafka.brokers", "a:1", "--kafka.brokers", "b:2,c:3"), "")
	if err != nil || strings.Join(cfg.Kafka.Brokers, " ") != "a:1 b:2 c:3" {
		t.Fatalf("repeated list flag: %v %v", cfg.Kafka.Brokers, err)
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

// genkey prints a fresh key that serve accepts as its bootstrap admin key.
func TestGenkey(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		var out, errb bytes.Buffer
		if code := run([]string{"genkey"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		key := strings.TrimSpace(out.String())
		if !strings.HasPrefix(key, "mm_") || len(key) != 46 || seen[key] {
			t.Fatalf("genkey printed %q", key)
		}
		seen[key] = true
		t.Setenv("MSGMESH_BOOTSTRAP_ADMIN_KEY", key)
		if code := run([]string{"serve", "--verify-config"}, &bytes.Buffer{}, &errb); code != 0 {
			t.Fatalf("serve refuses the generated key: %s", errb.String())
		}
	}
}

// kafka.tls.* and kafka.sasl.* come from the environment like every
// setting; the SASL password is masked by --verify-config.
func TestVerifyConfigKafkaSecurity(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("placeholder"), 0o600); err != nil {
		t.Fatal(err)
	}
	const password = "s3cr3t-kafka-password"
	t.Setenv("MSGMESH_KAFKA_BROKERS", "kafka-1:9096,kafka-2:9096")
	t.Setenv("MSGMESH_KAFKA_TLS_ENABLED", "true")
	t.Setenv("MSGMESH_KAFKA_TLS_CA_FILE", ca)
	t.Setenv("MSGMESH_KAFKA_TLS_SERVER_NAME", "kafka.example.com")
	t.Setenv("MSGMESH_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("MSGMESH_KAFKA_SASL_USERNAME", "msgmesh")
	t.Setenv("MSGMESH_KAFKA_SASL_PASSWORD", password)
	t.Setenv("MSGMESH_KAFKA_MIN_INSYNC_REPLICAS", "2")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String()+errb.String(), password) {
		t.Fatalf("password printed:\n%s", out.String())
	}
	for _, want := range []string{"kafka.sasl.password = (set)", "kafka.sasl.mechanism = SCRAM-SHA-512", "kafka.sasl.username = msgmesh",
		"kafka.tls.enabled = true", "kafka.tls.ca_file = " + ca, "kafka.tls.server_name = kafka.example.com", "kafka.min_insync_replicas = 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--verify-config lacks %q:\n%s", want, out.String())
		}
	}

	t.Setenv("MSGMESH_KAFKA_SASL_MECHANISM", "scram")
	t.Setenv("MSGMESH_KAFKA_TLS_CERT_FILE", ca)
	out.Reset()
	errb.Reset()
	if code := run([]string{"serve", "--verify-config"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, out.String())
	}
	for _, want := range []string{`kafka.sasl.mechanism (MSGMESH_KAFKA_SASL_MECHANISM): want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER`,
		"kafka.tls.cert_file (MSGMESH_KAFKA_TLS_CERT_FILE): kafka.tls.cert_file and kafka.tls.key_file go together"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(errb.String(), password) {
		t.Fatalf("password printed in errors:\n%s", errb.String())
	}
}
