package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var rtHTTP = newHTTPClient(32)

// postJSON POSTs body to u with header k: v and returns the body of a 200
// answer (else an error with it).
func postJSON(ctx context.Context, u string, body []byte, k, v string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(k, v)
	resp, err := rtHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// msgmeshRT is a fresh `msgmesh serve` subprocess (its own topic prefix)
// with topic "rt" and a token that may subscribe to it.
type msgmeshRT struct {
	srv     *server
	brokers string
	addr    string
	token   string
}

// startMsgmeshRT starts it; with oneCore on one core (GOMAXPROCS=1 and
// taskset -c 0 where available, see serverOpts).
func startMsgmeshRT(bin, brokers string, partitions, maxSubs int, oneCore bool) (*msgmeshRT, error) {
	if maxSubs > 10000 { // realtime.max_subscribers' default
		_ = os.Setenv("MSGMESH_REALTIME_MAX_SUBSCRIBERS", strconv.Itoa(maxSubs))
	}
	srv, err := startServerWith(bin, brokers, false, 90*time.Second, serverOpts{oneCore: oneCore})
	if err != nil {
		return nil, fmt.Errorf("realtime msgmesh: %w", err)
	}
	m := &msgmeshRT{srv: srv, brokers: brokers, addr: strings.TrimPrefix(srv.base, "http://")}
	if _, err := srv.createTopic("rt", partitions); err != nil {
		m.stop()
		return nil, err
	}
	// What a backend hands a browser: a token that may only subscribe.
	body := []byte(`{"ttl_seconds":7200,"capabilities":[{"ops":["subscribe"],"topics":["rt"]}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := postJSON(ctx, srv.base+"/v1/tokens", body, "Authorization", "Bearer "+srv.key)
	if err == nil {
		var ans struct {
			Token string `json:"token"`
		}
		if err = json.Unmarshal(b, &ans); err == nil && ans.Token == "" {
			err = fmt.Errorf("no token in %s", b)
		}
		m.token = ans.Token
	}
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("mint a subscribe token: %w", err)
	}
	return m, nil
}

func (m *msgmeshRT) name() string { return "msgmesh" }
func (m *msgmeshRT) pid() int     { return m.srv.pid }
func (m *msgmeshRT) pinned() bool { return m.srv.pinned }

func (m *msgmeshRT) sse() (string, string) {
	return m.addr, "GET /v1/topics/rt/events?token=" + url.QueryEscape(m.token) + " HTTP/1.1\r\nHost: " + m.addr +
		"\r\nAccept: text/event-stream\r\nUser-Agent: msgmesh-bench\r\n\r\n"
}

func (m *msgmeshRT) ws() (string, string, []byte) {
	return "ws://" + m.addr + "/v1/ws?token=" + url.QueryEscape(m.token), "", []byte(`{"type":"subscribe","id":"s","topic":"rt"}`)
}

func (m *msgmeshRT) publish(ctx context.Context, v []byte) error {
	body := append(append([]byte(`{"data":`), v...), '}')
	_, err := postJSON(ctx, m.srv.base+"/v1/topics/rt/messages", body, "Authorization", "Bearer "+m.srv.key)
	return err
}

func (m *msgmeshRT) stop() {
	m.srv.stop()
	cleanup(strings.Split(m.brokers, ","), m.srv.prefix)
}

// centrifugoRT is a Centrifugo v6 process with a minimal config: the HTTP
// server API (publish) behind an API key, connection JWTs (HMAC) whose
// "channels" claim subscribes the connection to channel "bench" on the
// server side (what a unidirectional client needs), and the uni_sse
// transport beside the default WebSocket one.
type centrifugoRT struct {
	cmd    *exec.Cmd
	pin    bool // runs under taskset (the -one-core rows)
	dir    string
	addr   string
	apiKey string
	token  string
	out    *tailBuffer
	exited chan struct{}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startCentrifugo starts it; with oneCore limited the way the one-core
// msgmesh is (GOMAXPROCS=1 and taskset on the same CPU set where
// available), so that the two compare on equal terms.
func startCentrifugo(bin string, oneCore bool) (*centrifugoRT, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	portN, _ := strconv.Atoi(port)
	dir, err := os.MkdirTemp("", "msgmesh-bench-centrifugo")
	if err != nil {
		return nil, err
	}
	c := &centrifugoRT{dir: dir, addr: addr, apiKey: randHex(16), out: &tailBuffer{max: 64 << 10}, exited: make(chan struct{})}
	secret := randHex(32)
	cfg := map[string]any{
		"http_server": map[string]any{"address": host, "port": portN},
		"log":         map[string]any{"level": "error"},
		"http_api":    map[string]any{"key": c.apiKey},
		"client":      map[string]any{"token": map[string]any{"hmac_secret_key": secret}},
		"uni_sse":     map[string]any{"enabled": true},
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "bench", "exp": time.Now().Add(2 * time.Hour).Unix(), "channels": []string{"bench"},
	})
	if c.token, err = tok.SignedString([]byte(secret)); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "-c", path)
	if oneCore {
		c.cmd, c.pin = oneCoreCommand(bin, "-c", path)
		c.cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	}
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return nil, fmt.Errorf("centrifugo exited during startup; its output:\n%s", c.out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := postJSON(ctx, "http://"+addr+"/api/info", []byte(`{}`), "X-API-Key", c.apiKey)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("centrifugo not ready within 30s (last: %v); its output:\n%s", err, c.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *centrifugoRT) name() string { return "centrifugo" }
func (c *centrifugoRT) pid() int     { return c.cmd.Process.Pid }
func (c *centrifugoRT) pinned() bool { return c.pin }

func (c *centrifugoRT) sse() (string, string) {
	connect := url.QueryEscape(`{"token":"` + c.token + `"}`)
	return c.addr, "GET /connection/uni_sse?cf_connect=" + connect + " HTTP/1.1\r\nHost: " + c.addr +
		"\r\nAccept: text/event-stream\r\nUser-Agent: msgmesh-bench\r\n\r\n"
}

func (c *centrifugoRT) ws() (string, string, []byte) {
	return "ws://" + c.addr + "/connection/websocket", "", []byte(`{"id":1,"connect":{"token":"` + c.token + `"}}`)
}

func (c *centrifugoRT) publish(ctx context.Context, v []byte) error {
	body := append(append([]byte(`{"channel":"bench","data":`), v...), '}')
	b, err := postJSON(ctx, "http://"+c.addr+"/api/publish", body, "X-API-Key", c.apiKey)
	if err == nil && bytes.Contains(b, []byte(`"error"`)) {
		err = fmt.Errorf("centrifugo publish: %s", bytes.TrimSpace(b))
	}
	return err
}

func (c *centrifugoRT) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	_ = os.RemoveAll(c.dir)
}
