package config

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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

func TestValidateKafkaSecurity(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Kafka)
		want string // "" = valid
	}{
		"scram":            {func(k *Kafka) { k.SASL = KafkaSASL{Mechanism: SASLScramSHA256, Username: "u", Password: "p"} }, ""},
		"oauth token":      {func(k *Kafka) { k.SASL = KafkaSASL{Mechanism: SASLOAuthBearer, Password: "tok"} }, ""},
		"oauth no token":   {func(k *Kafka) { k.SASL = KafkaSASL{Mechanism: SASLOAuthBearer} }, "kafka.sasl.password"},
		"plain no user":    {func(k *Kafka) { k.SASL = KafkaSASL{Mechanism: SASLPlain, Password: "p"} }, "kafka.sasl.username"},
		"lower case":       {func(k *Kafka) { k.SASL = KafkaSASL{Mechanism: "plain", Username: "u", Password: "p"} }, "kafka.sasl.mechanism"},
		"user no mech":     {func(k *Kafka) { k.SASL.Username = "u" }, "kafka.sasl.mechanism"},
		"ca without tls":   {func(k *Kafka) { k.TLS.CAFile = "/x" }, "kafka.tls.ca_file"},
		"missing ca":       {func(k *Kafka) { k.TLS = KafkaTLS{Enabled: true, CAFile: "/nonexistent/ca.pem"} }, "kafka.tls.ca_file"},
		"cert without key": {func(k *Kafka) { k.TLS = KafkaTLS{Enabled: true, CertFile: "/etc/hostname"} }, "kafka.tls.cert_file"},
		"embedded tls":     {func(k *Kafka) { k.Brokers = nil; k.TLS.Enabled = true }, "kafka.tls.enabled"},
		"isr over rf":      {func(k *Kafka) { k.ReplicationFactor, k.MinInsyncReplicas = 1, 2 }, "kafka.min_insync_replicas"},
		"isr zero":         {func(k *Kafka) { k.MinInsyncReplicas = 0 }, "kafka.min_insync_replicas"},
		"isr 2 of 3":       {func(k *Kafka) { k.ReplicationFactor, k.MinInsyncReplicas = 3, 2 }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			k := Defaults().Kafka
			k.Brokers = []string{"127.0.0.1:9092"}
			tc.edit(&k)
			err := k.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %s, got %v", tc.want, err)
			}
		})
	}
}

// Every section of Config validates itself, so a component can check
// the one section it receives.
func TestEverySectionValidates(t *testing.T) {
	c := Defaults()
	v := reflect.ValueOf(c)
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Struct {
			continue
		}
		m, ok := f.Type.MethodByName("Validate")
		if !ok || m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0) != reflect.TypeFor[error]() {
			t.Errorf("section %s has no Validate() error", f.Name)
			continue
		}
		if out := v.Field(i).MethodByName("Validate").Call(nil)[0]; !out.IsNil() {
			t.Errorf("default %s invalid: %v", f.Name, out.Interface())
		}
	}
}

// A section reports its problems in key order on every run, whatever the
// map iteration order inside it.
func TestSectionValidateOrderStable(t *testing.T) {
	sections := map[string]func() error{
		"realtime": func() error { return Realtime{}.Validate() },
		"webhooks": func() error { return Webhooks{}.Validate() },
		"poll":     func() error { return Poll{}.Validate() },
		"publish":  func() error { return Publish{}.Validate() },
		"http":     func() error { return HTTP{Addr: ":0"}.Validate() },
		"limits": func() error {
			return Limits{Free: PlanLimits{RequestsPerSecond: -1, MessagesPerSecond: -1}, Paid: PlanLimits{MonthlyMessages: -1}}.Validate()
		},
		"kafka": func() error {
			return Kafka{Brokers: []string{"b:9093"}, TopicPrefix: "msgmesh", ReplicationFactor: -1, MinInsyncReplicas: -1, RequestTimeout: time.Second,
				TLS: KafkaTLS{CAFile: "a", CertFile: "b", KeyFile: "c", ServerName: "d"}}.Validate()
		},
	}
	for name, validate := range sections {
		first := validate()
		if first == nil {
			t.Fatalf("%s: want errors", name)
		}
		var keys []string
		for _, e := range first.(interface{ Unwrap() []error }).Unwrap() {
			keys = append(keys, e.(*FieldError).Key)
		}
		if !slices.IsSorted(keys) || len(keys) < 2 {
			t.Errorf("%s: keys %v, want at least two, sorted", name, keys)
		}
		for i := 0; i < 20; i++ {
			if got := validate(); got.Error() != first.Error() {
				t.Fatalf("%s: order changed:\n%s\nthen\n%s", name, first, got)
			}
		}
	}
}

func TestLimitsRefuseNaN(t *testing.T) {
	err := Limits{Paid: PlanLimits{MessagesPerSecond: math.NaN()}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MSGMESH_LIMITS_PAID_MESSAGES_PER_SECOND") {
		t.Fatalf("NaN rate: %v", err)
	}
}
