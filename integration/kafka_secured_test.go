package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// A node on a SASL_SSL listener (scripts/kafka.sh with
// MSGMESH_KAFKA_SECURITY=sasl_ssl, SCRAM users, certificates made at
// start) publishes, polls, streams SSE and delivers webhooks; every
// refusal (wrong password, untrusted certificate, TLS on the plaintext
// listener, plaintext on the TLS one, a user without ACLs) ends the node
// within seconds with the cause and the setting to fix.
func TestSecuredKafka(t *testing.T) {
	k := kafkatest.StartScript(t, 1, "sasl_ssl")
	secure := func(mech, user, pass string) func(*config.Config) {
		return func(c *config.Config) {
			c.Kafka.Brokers = k.Brokers
			c.Kafka.TLS = config.KafkaTLS{Enabled: true, CAFile: k.CAFile}
			c.Kafka.SASL = config.KafkaSASL{Mechanism: mech, Username: user, Password: pass}
		}
	}

	t.Run("publish poll sse webhooks", func(t *testing.T) {
		c := scriptCluster(k.Brokers)
		rc := harness.NewReceiver(t)
		wh := harness.WebhookConfig(t, rc, 3, 2*time.Second, 100*time.Millisecond)
		n := c.Start(t, func(cfg *config.Config) {
			secure(config.SASLScramSHA512, kafkatest.ScriptUser, kafkatest.ScriptPassword)(cfg)
			// mutual TLS as well: the listener accepts a client certificate
			cfg.Kafka.TLS.CertFile, cfg.Kafka.TLS.KeyFile = k.ClientCert, k.ClientKey
			wh(cfg)
		})
		harness.CreateTopic(t, n.URL, c.AdminKey, "orders", 2)
		hook := harness.CreateWebhook(t, n.URL, c.AdminKey, "orders", rc.URLFor("", "/hook"), "")
		sse := mustSSE(t, n.URL, c.AdminKey, "orders", nil, "")
		defer sse.Close()

		publishSeq(t, n.URL, c.AdminKey, "orders", 0, 10)
		got := map[int]bool{}
		for _, m := range sse.Messages(t, 10, 30*time.Second) {
			got[seqOf(t, m.Msg)] = true
		}
		if len(got) != 10 {
			t.Fatalf("SSE delivered seqs %v, want 0..9", got)
		}
		var polled []harness.Msg
		deadline := time.Now().Add(30 * time.Second)
		for len(polled) < 10 && time.Now().Before(deadline) {
			polled = append(polled, harness.Poll(t, n.URL, c.AdminKey, "orders", harness.PollReq{Group: "g1", WaitMs: 1000})...)
		}
		if len(polled) != 10 {
			t.Fatalf("polled %d messages, want 10", len(polled))
		}
		if d := waitDeliveries(t, rc, "/hook", 10, 30*time.Second); len(d) != 10 {
			t.Fatalf("%d webhook deliveries, want 10 (webhook %s)", len(d), hook.ID)
		}
	})

	t.Run("mechanisms", func(t *testing.T) {
		// Every mechanism the listener offers authenticates through the same
		// options the node's clients use.
		now := time.Now().Unix()
		jwt := b64(`{"alg":"none"}`) + "." + b64(fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, kafkatest.ScriptUser, now, now+3600)) + "."
		for _, s := range []config.KafkaSASL{
			{Mechanism: config.SASLPlain, Username: kafkatest.ScriptUser, Password: kafkatest.ScriptPassword},
			{Mechanism: config.SASLScramSHA256, Username: kafkatest.ScriptUser, Password: kafkatest.ScriptPassword},
			{Mechanism: config.SASLScramSHA512, Username: kafkatest.ScriptUser, Password: kafkatest.ScriptPassword},
			{Mechanism: config.SASLOAuthBearer, Password: jwt},
		} {
			kc := config.Defaults().Kafka
			kc.Brokers, kc.TLS, kc.SASL = k.Brokers, config.KafkaTLS{Enabled: true, CAFile: k.CAFile}, s
			opts, err := kafkaclient.Options(kc, kc.Brokers)
			if err != nil {
				t.Fatal(err)
			}
			if err := kafkaclient.Check(context.Background(), opts, true, "msgmesh.__control", 10*time.Second); err != nil {
				t.Errorf("%s: %v", s.Mechanism, err)
			}
		}
	})

	otherCA := untrustedCA(t)
	for name, tc := range map[string]struct {
		mutate func(*config.Config)
		want   []string
	}{
		"wrong password": {secure(config.SASLScramSHA256, kafkatest.ScriptUser, "not-the-password"),
			[]string{"(authentication)", "SASL_AUTHENTICATION_FAILED", "kafka.sasl.password"}},
		"untrusted certificate": {func(c *config.Config) {
			secure(config.SASLScramSHA256, kafkatest.ScriptUser, kafkatest.ScriptPassword)(c)
			c.Kafka.TLS.CAFile = otherCA
		}, []string{"(tls)", "certificate signed by unknown authority", "kafka.tls.ca_file"}},
		"tls on the plaintext listener": {func(c *config.Config) {
			secure(config.SASLScramSHA256, kafkatest.ScriptUser, kafkatest.ScriptPassword)(c)
			c.Kafka.Brokers = k.Plaintext
		}, []string{"(plaintext_listener)", "kafka.tls.enabled=false"}},
		"plaintext on the tls listener": {func(c *config.Config) { c.Kafka.Brokers = k.Brokers },
			[]string{"(tls_listener)", "kafka.tls.enabled=true"}},
		"missing acl": {secure(config.SASLScramSHA256, kafkatest.ScriptNoACLUser, kafkatest.ScriptNoACLPassword),
			[]string{"(authorization)", "TOPIC_AUTHORIZATION_FAILED", "ACLs"}},
	} {
		t.Run(name, func(t *testing.T) {
			const password = "not-the-password"
			err, logs, took := runRefused(t, tc.mutate)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run error lacks %q: %v", w, err)
				}
			}
			if !strings.Contains(logs, "kafka refused the connection") {
				t.Errorf("log lacks the refusal:\n%s", logs)
			}
			if strings.Contains(logs, password) || strings.Contains(err.Error(), password) {
				t.Errorf("the password is logged:\n%s", logs)
			}
			if took > 15*time.Second {
				t.Errorf("refused after %v, want within seconds", took)
			}
		})
	}
}

// runRefused boots a node on the script's cluster that must end by itself:
// it returns Run's error, the log and how long it took.
func runRefused(t *testing.T, mutate func(*config.Config)) (error, string, time.Duration) {
	t.Helper()
	cfg := scriptCluster(nil).Config(t)
	mutate(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, cfg, []string{app.All}, log)
	if err != nil {
		return err, logs.String(), time.Since(t0)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run ended without an error")
		}
		return err, logs.String(), time.Since(t0)
	case <-time.After(30 * time.Second):
		r := harness.Do(t, "http://"+a.Addr, "GET", "/readyz", "", nil)
		t.Fatalf("node still runs after 30s (readyz %d %s); log:\n%s", r.Status, r.Body, logs.String())
	}
	return nil, "", 0
}

// syncBuffer collects a node's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// scriptCluster is a harness.Cluster on brokers of kafkatest.StartScript.
func scriptCluster(brokers []string) *harness.Cluster {
	return &harness.Cluster{Brokers: brokers, Kind: kafkatest.KindReal, Prefix: strings.ReplaceAll(kafkatest.Name("it"), "-", ""),
		AdminKey: harness.NewKey(), OperatorKey: "op_" + harness.NewKey(), SecretsKey: harness.NewSecretsKey()}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// untrustedCA writes a self-signed CA that signed nothing the broker has.
func untrustedCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the broker's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
