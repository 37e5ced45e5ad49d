package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Issue 18 item 3: a second msgmesh on the data directory of a running
// embedded broker fails at once, naming the process that holds it; the
// first keeps serving.
func TestSecondServerOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	httpAddr, kafkaAddr := h.FreeAddr(t), h.FreeAddr(t)
	first := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))

	code, out := h.RunBinary(t, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+h.FreeAddr(t), "MSGMESH_HTTP_ADDR="+h.FreeAddr(t)), "serve")
	if code == 0 {
		t.Fatalf("second server on %s exited 0:\n%s", dir, out)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(first.Pid()), "in use by another process"} {
		if !strings.Contains(out, want) {
			t.Errorf("second server's message does not say %q:\n%s", want, out)
		}
	}
	h.Must(t, first.URL, "GET", "/readyz", "", nil, 200)

	// Once the first is gone (even by kill -9) the directory is free again.
	first.Kill()
	again := h.StartProcess(t, httpAddr, h.CleanEnv("MSGMESH_DATA_DIR="+dir, "MSGMESH_KAFKA_EMBEDDED_ADDR="+kafkaAddr, "MSGMESH_HTTP_ADDR="+httpAddr))
	h.Must(t, again.URL, "GET", "/readyz", "", nil, 200)
}

// Issue 18 item 5: refusal and range texts say what really happened.
func TestErrorTextsSayWhatHappened(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	for _, topic := range []string{"chat", "orders"} {
		h.Must(t, n.URL, "POST", "/v1/topics", c.AdminKey, map[string]any{"name": topic}, 201)
	}
	tok, _ := h.MintToken(t, n.URL, c.AdminKey, 300, []h.Cap{{Ops: []string{"publish", "subscribe"}, Topics: []string{"chat"}, Rooms: []string{"room-42"}}})

	// Another topic, with a room: refused for the topic, not for "every room".
	r := h.Do(t, n.URL, "POST", "/v1/topics/orders/messages", tok, map[string]any{"data": 1, "room": "eu"})
	msg := string(r.Body)
	if r.Status != 403 || !strings.Contains(msg, `may not publish on topic \"orders\"`) || strings.Contains(msg, "room") {
		t.Errorf("publish to another topic with a room: %d %s", r.Status, msg)
	}
	// Its own topic without a room: told that it must name one of its rooms.
	r = h.Do(t, n.URL, "POST", "/v1/topics/chat/messages", tok, map[string]any{"data": 1})
	if r.Status != 403 || !strings.Contains(string(r.Body), "in every room (it may use only some rooms of this topic: name one of them)") {
		t.Errorf("publish without a room: %d %s", r.Status, r.Body)
	}

	// ttl_seconds 0 is the documented default; the range error says so.
	got := h.Must(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": 0}, 200).JSON(t)
	if got["ttl_seconds"] != float64(900) {
		t.Errorf("ttl_seconds 0 answered %v, want the default 900", got["ttl_seconds"])
	}
	r = h.Do(t, n.URL, "POST", "/v1/tokens", c.AdminKey, map[string]any{"ttl_seconds": 86401})
	if r.Status != 422 || !strings.Contains(string(r.Body), "between 1 and 86400 (tokens.max_ttl), or 0 or absent for the default of 900") {
		t.Errorf("ttl_seconds 86401: %d %s", r.Status, r.Body)
	}

	// The operator key is told what it may do.
	r = h.Do(t, n.URL, "GET", "/v1/keys", c.OperatorKey, nil)
	if r.Status != 403 || !strings.Contains(string(r.Body), "may only manage tenants and token signing keys") {
		t.Errorf("operator on /v1/keys: %d %s", r.Status, r.Body)
	}

	// Errors show <...> as is.
	r = h.Do(t, n.URL, "GET", "/v1/topics/chat/events?cursor=garbage", c.AdminKey, nil)
	if r.Status != 400 || strings.Contains(string(r.Body), `\u003c`) || !strings.Contains(string(r.Body), "<") {
		t.Errorf("bad cursor: %d %s, want <...> unescaped", r.Status, r.Body)
	}
}

// Issue 18 item 9: msgmesh genkey, keys create|list|revoke and token,
// against a real msgmesh process.
func TestOperatorCLI(t *testing.T) {
	c := h.NewCluster(t)
	code, out := h.RunBinary(t, h.CleanEnv(), "genkey")
	gen := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^mm_[A-Za-z0-9_-]{43}$`).MatchString(gen) {
		t.Fatalf("genkey: exit %d, %q", code, out)
	}
	// The generated key is what the server takes as its bootstrap admin key.
	c.AdminKey = gen
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr))
	h.Must(t, p.URL, "POST", "/v1/topics", gen, map[string]any{"name": "orders"}, 201)

	cli := func(key string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(h.Binary(t), args...)
		cmd.Env = h.CleanEnv("MSGMESH_URL="+p.URL, "MSGMESH_KEY="+key)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	code, stdout, stderr := cli(gen, "keys", "create", "--name", "shop", "--role", "producer")
	prod := strings.TrimSpace(stdout)
	if code != 0 || !strings.HasPrefix(prod, "mm_") || !strings.Contains(stderr, "shown once") {
		t.Fatalf("keys create: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	h.Must(t, p.URL, "POST", "/v1/topics/orders/messages", prod, map[string]any{"data": 1}, 200)
	h.Must(t, p.URL, "POST", "/v1/topics", prod, map[string]any{"name": "nope"}, 403)

	code, stdout, stderr = cli(gen, "keys", "create", "--name", "eu-only", "--capabilities", `[{"ops":["publish"],"topics":["orders"],"rooms":["eu"]}]`)
	eu := strings.TrimSpace(stdout)
	if code != 0 || !strings.HasPrefix(eu, "mm_") {
		t.Fatalf("keys create --capabilities: exit %d %q %q", code, stdout, stderr)
	}
	h.Must(t, p.URL, "POST", "/v1/topics/orders/messages", eu, map[string]any{"data": 1, "room": "eu"}, 200)
	h.Must(t, p.URL, "POST", "/v1/topics/orders/messages", eu, map[string]any{"data": 1, "room": "us"}, 403)

	// A key without keys.manage is refused with the API's own words.
	code, _, stderr = cli(prod, "keys", "create", "--name", "x", "--role", "admin")
	if code != 1 || !strings.Contains(stderr, "403 forbidden") {
		t.Fatalf("keys create with a producer key: exit %d stderr %q", code, stderr)
	}

	code, stdout, stderr = cli(gen, "keys", "list")
	if code != 0 || !strings.Contains(stdout, `"shop"`) || strings.Contains(stdout, prod) {
		t.Fatalf("keys list: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	var listed struct {
		Keys []struct{ ID, Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
		t.Fatal(err)
	}
	var shopID string
	for _, k := range listed.Keys {
		if k.Name == "shop" {
			shopID = k.ID
		}
	}

	code, stdout, stderr = cli(prod, "token", "--ttl", "60", "--capabilities", `[{"ops":["publish"],"topics":["orders"]}]`)
	tok := strings.TrimSpace(stdout)
	if code != 0 || strings.Count(tok, ".") != 2 || !strings.Contains(stderr, "expires at") {
		t.Fatalf("token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	h.Must(t, p.URL, "POST", "/v1/topics/orders/messages", tok, map[string]any{"data": 2}, 200)

	code, _, stderr = cli(gen, "keys", "revoke", shopID)
	if code != 0 {
		t.Fatalf("keys revoke %s: exit %d %q", shopID, code, stderr)
	}
	waitStatus(t, p.URL, prod, 401)

	code, _, stderr = cli("", "token")
	if code != 1 || !strings.Contains(stderr, "MSGMESH_KEY") {
		t.Fatalf("token without a key: exit %d %q", code, stderr)
	}
}

// waitStatus waits until GET /v1/topics with key answers want.
func waitStatus(t *testing.T, base, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.Do(t, base, "GET", "/v1/topics", key, nil)
		if r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/topics: %d %s, want %d", r.Status, r.Body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
