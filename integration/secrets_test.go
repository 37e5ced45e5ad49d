package integration

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/keyring"
	"github.com/msgmesh/msgmesh/platform/names"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// Reading the whole control topic (every record's value and headers, as
// kcat would) yields no signing seed and no webhook secret in any
// encoding, and no string in it signs a token that is accepted, while a
// token signed with the real seed (which only the KEK opens) is.
func TestSecretsNotInControlTopic(t *testing.T) {
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	n := c.Start(t, func(cfg *config.Config) {
		h.WebhookConfig(t, rc, 3, 2*time.Second, 100*time.Millisecond)(cfg)
		h.Unlimited(cfg)
	})
	admin := c.AdminKey
	h.CreateTopic(t, n.URL, admin, "orders", 1)
	wh := h.CreateWebhook(t, n.URL, admin, "orders", rc.URLFor("", "/hook"), "")
	h.Must(t, n.URL, "POST", "/v1/signing-keys", c.OperatorKey, nil, 201)
	wh2 := h.CreateWebhook(t, n.URL, admin, "orders", rc.URLFor("", "/hook2"), "")

	st := c.ReplayControlLog(t)
	if err := st.Unreadable(); err != nil {
		t.Fatalf("the cluster's KEK does not open the log: %v", err)
	}
	var needles [][]byte
	var kids []string
	for _, k := range st.SigningKeys() {
		kids = append(kids, k.KID)
		raw, err := base64.StdEncoding.DecodeString(k.Seed)
		if err != nil || len(raw) != ed25519.SeedSize {
			t.Fatalf("signing key %s: no seed in the projection", k.KID)
		}
		needles = append(needles, encodings(raw)...)
		needles = append(needles, ed25519.NewKeyFromSeed(raw)) // the expanded private key
	}
	if len(kids) != 2 {
		t.Fatalf("signing keys %v, want 2", kids)
	}
	for _, s := range []string{wh.Secret, wh2.Secret} {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(raw) != 32 {
			t.Fatalf("webhook secret %q", s)
		}
		needles = append(needles, []byte(s))
		needles = append(needles, encodings(raw)...)
	}
	recs := c.ControlRecords(t)
	sealedSeeds, sealedSecrets := 0, 0
	for _, r := range recs {
		hay := [][]byte{r.Key, r.Value}
		for _, hd := range r.Headers {
			hay = append(hay, []byte(hd.Key), hd.Value)
		}
		for _, b := range hay {
			for i, nd := range needles {
				if bytes.Contains(b, nd) {
					t.Errorf("control record at offset %d holds secret #%d (%q)", r.Offset, i, nd)
				}
			}
		}
		var ev controlstate.Event
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("offset %d: %v", r.Offset, err)
		}
		switch ev.Type {
		case controlstate.TypeSigningKeyCreated:
			var d controlstate.SigningKeyCreatedData
			_ = json.Unmarshal(ev.Data, &d)
			if d.Seed != "" || d.SealedSeed == nil || d.SealedSeed.KEK != keyIDOf(t, c.SecretsKey) {
				t.Errorf("signing_key.created at %d: %s", r.Offset, ev.Data)
			}
			sealedSeeds++
		case controlstate.TypeWebhookCreated:
			var d controlstate.WebhookCreatedData
			_ = json.Unmarshal(ev.Data, &d)
			if d.Secret != "" || d.SealedSecret == nil {
				t.Errorf("webhook.created at %d: %s", r.Offset, ev.Data)
			}
			sealedSecrets++
		}
	}
	if sealedSeeds != 2 || sealedSecrets != 2 {
		t.Fatalf("read %d records: %d sealed seeds and %d sealed secrets, want 2 and 2", len(recs), sealedSeeds, sealedSecrets)
	}
	// The same with kcat, as an SRE would dump it (key, headers, value).
	t.Run("kcat", func(t *testing.T) {
		out := h.RunKcat(t, nil, "-C", "-b", strings.Join(c.Brokers, ","), "-t", names.Mapper{Prefix: c.Prefix}.ControlTopic(),
			"-e", "-q", "-f", "%k\t%h\t%s\n")
		if n := bytes.Count(out, []byte("\n")); n != len(recs) {
			t.Fatalf("kcat printed %d records, want %d", n, len(recs))
		}
		for i, nd := range needles {
			if bytes.Contains(out, nd) {
				t.Errorf("kcat's dump of the control topic holds secret #%d", i)
			}
		}
	})

	// Forgery: every string of the log that decodes to 32 bytes or more
	// (first and last 32 bytes tried) as an Ed25519 seed, for every kid.
	keyID := bootstrapKeyID(t, n.URL, admin)
	forge := func(kid string, seed []byte) string {
		now := time.Now()
		claims := auth.TokenClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: auth.TokenIssuer, Subject: "default", ID: "tok_forged",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(10 * time.Minute))}, ParentKey: keyID, Caps: capability.ForRole(capability.RoleAdmin)}
		tk := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
		tk.Header["kid"] = kid
		s, err := tk.SignedString(ed25519.NewKeyFromSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The check works: the real seed (opened with the KEK) signs a token
	// that is accepted.
	real, _ := base64.StdEncoding.DecodeString(mustSigning(t, st, kids[0]).Seed)
	if r := h.Do(t, n.URL, "GET", "/v1/topics", forge(kids[0], real), nil); r.Status != 200 {
		t.Fatalf("a token signed with the real seed: %d %s (the forgery check would prove nothing)", r.Status, r.Body)
	}
	var cands [][]byte
	seen := map[string]bool{}
	for _, r := range recs {
		var v any
		_ = json.Unmarshal(r.Value, &v)
		for _, s := range jsonStrings(v) {
			for _, b := range decodings(s) {
				for _, c := range [][]byte{b[:32], b[len(b)-32:]} {
					if !seen[string(c)] {
						seen[string(c)] = true
						cands = append(cands, c)
					}
				}
			}
		}
	}
	if len(cands) < 4 {
		t.Fatalf("only %d candidate seeds in the log: the ciphertexts were not found", len(cands))
	}
	for _, kid := range kids {
		for _, cand := range cands {
			if r := h.Do(t, n.URL, "GET", "/v1/topics", forge(kid, cand), nil); r.Status != 401 {
				t.Fatalf("a token signed with bytes from the control log was answered %d %s", r.Status, r.Body)
			}
		}
	}
	t.Logf("%d control records searched for %d byte strings (2 seeds, their private keys, 2 webhook secrets, in every encoding); %d candidate seeds refused for %d kids", len(recs), len(needles), len(cands), len(kids))
}

// A node whose key-encryption key is not the one the log's secrets are
// sealed under refuses to start, naming the key id it lacks, and never
// answers ready.
func TestSecretsWrongKeyRefusesToStart(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	h.CreateTopic(t, n.URL, c.AdminKey, "x", 1)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	want := keyIDOf(t, c.SecretsKey)
	err := startRefused(t, c, func(cfg *config.Config) { cfg.Secrets.Key = h.NewSecretsKey() })
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "signing key sk_") {
		t.Fatalf("refusal %q does not name the key id %s and the secret", err, want)
	}
	t.Logf("refused: %v", err)
	// The binary exits 1 with that error.
	code, out := h.RunBinary(t, c.EnvFor(h.FreeAddr(t), "MSGMESH_SECRETS_KEY="+h.NewSecretsKey()), "serve")
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "cannot be decrypted") {
		t.Fatalf("msgmesh serve with another key: exit %d, want 1 naming %s:\n%s", code, want, out)
	}
	// With the right key it starts again.
	c.Start(t, nil)
}

// Events an earlier version wrote with plaintext secrets are read, then
// re-wrapped once on first start (new events, sealed); tokens of the old
// signing key keep verifying; a second start appends nothing.
func TestSecretsPlaintextMigration(t *testing.T) {
	c := h.NewCluster(t)
	topic := names.Mapper{Prefix: c.Prefix}.ControlTopic()
	adm := c.Admin(t)
	// EnsureTopic returns once the topic is served: the legacy events
	// below are produced at once.
	if _, err := kafkaclient.EnsureTopic(context.Background(), adm, topic, kafkaclient.TopicSpec{
		Partitions: 1, Configs: map[string]string{"retention.ms": "-1", "cleanup.policy": "delete"}}); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	seedB64 := base64.StdEncoding.EncodeToString(seed)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	kt := c.TenantKafkaTopic("default", "orders")
	legacy := []struct {
		typ  string
		data string
	}{
		{controlstate.TypeTenantCreated, `{"tenant":"default","plan":"free","admin_key":{"tenant":"default","key_id":"key_legacy","name":"bootstrap","role":"admin","hash":"` + auth.HashKey(c.AdminKey) + `","prefix":"` + c.AdminKey[:9] + `"}}`},
		{controlstate.TypeTopicCreated, `{"tenant":"default","topic":"orders","partitions":1,"kafka_topic":"` + kt + `"}`},
		{controlstate.TypeSigningKeyCreated, `{"kid":"sk_00000000001e9ac1","seed":"` + seedB64 + `"}`},
		{controlstate.TypeWebhookCreated, `{"tenant":"default","id":"wh_legacy","topic":"orders","kafka_topic":"` + kt + `","url":"https://hooks.example.com/x","secret":"` + secret + `","group":"` + c.Prefix + `.default.wh.wh_legacy"}`},
	}
	cl := c.KafkaClient(t)
	for i, e := range legacy {
		val := `{"v":1,"type":"` + e.typ + `","id":"legacy` + string(rune('a'+i)) + `","at":"2026-11-01T00:00:00Z","data":` + e.data + `}`
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(val)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	n := c.Start(t, nil, app.ControlPlane)
	// The old signing key still verifies: a token signed with its seed.
	now := time.Now()
	claims := auth.TokenClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: auth.TokenIssuer, Subject: "default", ID: "tok_old",
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute))}, ParentKey: "key_legacy", Caps: capability.ForRole(capability.RoleAdmin)}
	tk := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tk.Header["kid"] = "sk_00000000001e9ac1"
	old, _ := tk.SignedString(ed25519.NewKeyFromSeed(seed))
	h.Must(t, n.URL, "GET", "/v1/topics", old, nil, 200)

	kek := keyIDOf(t, c.SecretsKey)
	recs := c.ControlRecords(t)
	rewrapped := map[string]bool{}
	for _, r := range recs[len(legacy):] {
		if bytes.Contains(r.Value, []byte(seedB64)) || bytes.Contains(r.Value, []byte(secret)) {
			t.Errorf("new record at %d holds a legacy secret in plaintext", r.Offset)
		}
		var ev controlstate.Event
		_ = json.Unmarshal(r.Value, &ev)
		switch ev.Type {
		case controlstate.TypeSigningKeyRewrapped:
			var d controlstate.SigningKeyRewrappedData
			_ = json.Unmarshal(ev.Data, &d)
			rewrapped[d.KID] = d.SealedSeed != nil && d.SealedSeed.KEK == kek
		case controlstate.TypeWebhookSecretRewrapped:
			var d controlstate.WebhookSecretRewrappedData
			_ = json.Unmarshal(ev.Data, &d)
			rewrapped[d.ID] = d.SealedSecret != nil && d.SealedSecret.KEK == kek
		}
	}
	if !rewrapped["sk_00000000001e9ac1"] || !rewrapped["wh_legacy"] {
		t.Fatalf("rewrap events after migration: %v", rewrapped)
	}
	st := c.ReplayControlLog(t)
	if k := mustSigning(t, st, "sk_00000000001e9ac1"); k.Seed != seedB64 || k.Sealed == nil || !k.Exposed {
		t.Fatalf("replayed legacy key: %+v", k)
	}
	if w, ok := st.Webhook("default", "wh_legacy"); !ok || w.Secret != secret || w.SealedSecret == nil {
		t.Fatalf("replayed legacy webhook: %+v", w)
	}
	// The listing flags the exposed key.
	var list struct {
		Keys []struct {
			KID     string `json:"kid"`
			Exposed bool   `json:"exposed"`
			KEK     string `json:"kek"`
		} `json:"signing_keys"`
	}
	_ = json.Unmarshal(h.Must(t, n.URL, "GET", "/v1/signing-keys", c.OperatorKey, nil, 200).Body, &list)
	for _, k := range list.Keys {
		if k.Exposed != (k.KID == "sk_00000000001e9ac1") || k.KEK != kek {
			t.Errorf("signing key listing %+v: want exposed only for sk_00000000001e9ac1, every one sealed under %s", k, kek)
		}
	}
	// One-time: a second start appends nothing.
	end := h.TotalRecords(t, c.Brokers, topic)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n = c.Start(t, nil, app.ControlPlane)
	h.Must(t, n.URL, "GET", "/v1/topics", old, nil, 200)
	if got := h.TotalRecords(t, c.Brokers, topic); got != end {
		t.Fatalf("second start appended %d control events", got-end)
	}
}

// Rotation of the key-encryption key: a node started with a new key and
// the old one in secrets.previous_key_files re-wraps every secret under
// the new key; afterwards the old key is no longer needed (a node with
// only the new key starts and keeps verifying old tokens) and a node with
// only the old key refuses to start, naming the new key's id.
func TestSecretsKEKRotation(t *testing.T) {
	c := h.NewCluster(t)
	rc := h.NewReceiver(t)
	whcfg := h.WebhookConfig(t, rc, 3, 2*time.Second, 100*time.Millisecond)
	n := c.Start(t, whcfg)
	admin := c.AdminKey
	h.CreateTopic(t, n.URL, admin, "orders", 1)
	wh := h.CreateWebhook(t, n.URL, admin, "orders", rc.URLFor("", "/hook"), "")
	tok, _ := h.MintToken(t, n.URL, admin, 3600, nil)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	oldKey := c.SecretsKey
	oldFile := filepath.Join(t.TempDir(), "old.key")
	if err := os.WriteFile(oldFile, []byte(oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	newKey := h.NewSecretsKey()
	n = c.Start(t, func(cfg *config.Config) {
		whcfg(cfg)
		cfg.Secrets.Key = newKey
		cfg.Secrets.PreviousKeyFiles = []string{oldFile}
	})
	h.Must(t, n.URL, "GET", "/v1/topics", tok, nil, 200)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// The log replayed with only the new key opens every secret in use.
	c.SecretsKey = newKey
	st := c.ReplayControlLog(t)
	if err := st.Unreadable(); err != nil {
		t.Fatalf("after rotation the new key alone does not open the log: %v", err)
	}
	newID := keyIDOf(t, newKey)
	for _, k := range st.SigningKeys() {
		if k.Sealed == nil || k.Sealed.KEK != newID {
			t.Errorf("signing key %s sealed under %+v, want %s", k.KID, k.Sealed, newID)
		}
	}
	if w, ok := st.Webhook("default", wh.ID); !ok || w.Secret != wh.Secret || w.SealedSecret.KEK != newID {
		t.Fatalf("webhook after rotation: ok=%v kek=%+v same secret=%v", ok, w.SealedSecret, w.Secret == wh.Secret)
	}
	// The old key is no longer needed.
	n = c.Start(t, whcfg)
	h.Must(t, n.URL, "GET", "/v1/topics", tok, nil, 200)
	got := h.Must(t, n.URL, "GET", "/v1/webhooks/"+wh.ID, admin, nil, 200).JSON(t)
	if got["id"] != wh.ID {
		t.Fatalf("webhook after rotation: %v", got)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// Only the old key: refused, naming the new one.
	err := startRefused(t, c, func(cfg *config.Config) { cfg.Secrets.Key = oldKey })
	if !strings.Contains(err.Error(), newID) {
		t.Fatalf("refusal %q does not name %s", err, newID)
	}
}

// startRefused boots a node of c that must fail before it is ready; it
// returns the error Run ended with.
func startRefused(t *testing.T, c *h.Cluster, mutate func(*config.Config)) error {
	t.Helper()
	cfg := c.Config(t)
	mutate(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, []string{app.All}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("the node stopped without an error")
			}
			return err
		case <-ctx.Done():
			t.Fatal("the node neither failed nor stopped")
		case <-time.After(50 * time.Millisecond):
			if resp, err := http.Get("http://" + a.Addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					t.Fatal("the node answered ready without its key-encryption key")
				}
			}
		}
	}
}

func keyIDOf(t *testing.T, key string) string {
	t.Helper()
	k, err := keyring.ParseKey([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return keyring.KeyID(k)
}

func mustSigning(t *testing.T, st *controlstate.State, kid string) controlstate.SigningKey {
	t.Helper()
	k, ok := st.SigningKey(kid)
	if !ok {
		t.Fatalf("signing key %s missing", kid)
	}
	return k
}

func bootstrapKeyID(t *testing.T, base, admin string) string {
	t.Helper()
	var out struct {
		Keys []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(h.Must(t, base, "GET", "/v1/keys", admin, nil, 200).Body, &out); err != nil || len(out.Keys) == 0 {
		t.Fatalf("keys: %v", err)
	}
	return out.Keys[0].ID
}

// encodings are the ways a secret could be written: raw, base64 (both
// alphabets, padded or not), hex.
func encodings(raw []byte) [][]byte {
	return [][]byte{raw, []byte(base64.StdEncoding.EncodeToString(raw)), []byte(base64.RawStdEncoding.EncodeToString(raw)),
		[]byte(base64.URLEncoding.EncodeToString(raw)), []byte(base64.RawURLEncoding.EncodeToString(raw)), []byte(hex.EncodeToString(raw))}
}

// decodings are the byte strings of at least 32 bytes s decodes to.
func decodings(s string) [][]byte {
	s = strings.TrimPrefix(s, "whsec_")
	var out [][]byte
	if len(s) >= 32 {
		out = append(out, []byte(s))
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) >= 32 {
		out = append(out, b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) >= 32 {
			out = append(out, b)
		}
	}
	return out
}

func jsonStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case map[string]any:
		var out []string
		for k, e := range x {
			out = append(out, k)
			out = append(out, jsonStrings(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

// The embedded default makes its key-encryption key in the data
// directory (mode 0600), says so, and reuses it on the next start.
func TestSecretsEmbeddedKeyInDataDir(t *testing.T) {
	dir := t.TempDir()
	boot := func() string {
		cfg := config.Defaults()
		cfg.HTTP.Addr, cfg.Kafka.EmbeddedAddr, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", dir
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		a, err := app.New(ctx, cfg, []string{app.All}, slog.New(slog.NewTextHandler(&syncWriter{b: &logs}, nil)))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		h.WaitReady(t, "http://"+a.Addr)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	first := boot()
	path := filepath.Join(dir, app.KeyFileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v %v", path, fi, err)
	}
	b, _ := os.ReadFile(path)
	kek := keyIDOf(t, string(b))
	if !strings.Contains(first, "generated the key-encryption key") || !strings.Contains(first, kek) {
		t.Fatalf("first start did not say it generated %s:\n%s", kek, first)
	}
	second := boot()
	if strings.Contains(second, "generated the key-encryption key") || !strings.Contains(second, kek) {
		t.Fatalf("second start did not reuse %s:\n%s", kek, second)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, b) {
		t.Fatal("the key file changed")
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A running node that sees a secret re-wrapped under a key-encryption key
// it does not hold (another node rotated without giving it the new key)
// stops with the error naming that key, rather than run on.
func TestSecretsRunningNodeStopsOnUnknownKEK(t *testing.T) {
	c := h.NewCluster(t)
	old := c.Start(t, nil)
	oldFile := filepath.Join(t.TempDir(), "old.key")
	if err := os.WriteFile(oldFile, []byte(c.SecretsKey), 0o600); err != nil {
		t.Fatal(err)
	}
	newKey := h.NewSecretsKey()
	c.Start(t, func(cfg *config.Config) { cfg.Secrets.Key, cfg.Secrets.PreviousKeyFiles = newKey, []string{oldFile} })
	ok, _ := h.PollUntil(60*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(old.URL + "/healthz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return false
	})
	if !ok {
		t.Fatal("the node without the new key kept running")
	}
	if err := old.Stop(); err == nil || !strings.Contains(err.Error(), keyIDOf(t, newKey)) {
		t.Fatalf("the node stopped with %v, want an error naming %s", err, keyIDOf(t, newKey))
	}
}
