package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// server is the msgmesh under test: a `msgmesh serve` subprocess, or (with
// -inprocess, for profiling the gateway with -cpuprofile) the same app
// booted inside this process.
type server struct {
	base   string // http://127.0.0.1:port
	key    string // bootstrap admin key
	prefix string // Kafka topic prefix of this run
	pid    int    // subprocess pid (0 in-process)
	pinned bool   // the subprocess runs under taskset -c 0

	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan struct{}
	// in-process
	cancel context.CancelFunc
	done   chan error
}

func randomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "mm_" + base64.RawURLEncoding.EncodeToString(b) // 43 URL-safe characters
}

func randomPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "bench" + hex.EncodeToString(b)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// startServer starts msgmesh against brokers and waits for /readyz.
func startServer(bin, brokers string, inprocess bool, readyTimeout time.Duration) (*server, error) {
	return startServerWith(bin, brokers, inprocess, readyTimeout, serverOpts{})
}

// serverOpts are the settings of the -one-core runs.
type serverOpts struct {
	// oneCore runs the subprocess with GOMAXPROCS=1 and, where taskset
	// exists, pinned to CPU 0.
	oneCore bool
	// prefix and key, when set, reuse an earlier run's topic prefix and
	// admin key: the new server replays the same control log, so the
	// topics (and their pre-filled records) are there already.
	prefix, key string
}

// oneCoreCPU is the CPU set of every -one-core process (taskset -c).
const oneCoreCPU = "0"

// oneCoreCommand is the command that runs bin with args on one core: under
// `taskset -c 0` where taskset exists (it execs bin, so the pid is bin's and
// /proc/<pid>/stat counts bin's CPU), else bin alone (pinned false). The
// caller adds GOMAXPROCS=1 to the environment: both limits together keep a
// Go server to one core's worth of scheduling and of CPU.
func oneCoreCommand(bin string, args ...string) (cmd *exec.Cmd, pinned bool) {
	if ts, err := exec.LookPath("taskset"); err == nil {
		return exec.Command(ts, append([]string{"-c", oneCoreCPU, bin}, args...)...), true
	}
	return exec.Command(bin, args...), false
}

// cpusAllowed is pid's Cpus_allowed_list from /proc ("?" if unreadable):
// the log shows that a -one-core process really is pinned.
func cpusAllowed(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// startServerWith is startServer with opts.
func startServerWith(bin, brokers string, inprocess bool, readyTimeout time.Duration, opts serverOpts) (*server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{base: "http://" + addr, key: randomKey(), prefix: randomPrefix()}
	if opts.prefix != "" {
		s.prefix, s.key = opts.prefix, opts.key
	}
	if inprocess && opts.oneCore {
		return nil, fmt.Errorf("-one-core needs a msgmesh subprocess, not -inprocess")
	}
	if inprocess {
		cfg := config.Defaults()
		cfg.HTTP.Addr = addr
		cfg.Kafka.Brokers = strings.Split(brokers, ",")
		cfg.Kafka.TopicPrefix = s.prefix
		cfg.BootstrapAdminKey = s.key
		cfg.Log.Level = "warn"
		cfg.Limits.Free, cfg.Limits.Paid = config.PlanLimits{}, config.PlanLimits{} // unlimited
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		a, err := app.New(ctx, cfg, []string{app.All}, log)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("in-process msgmesh: %w", err)
		}
		rctx, rcancel := context.WithCancel(context.Background())
		s.cancel, s.done = rcancel, make(chan error, 1)
		go func() { s.done <- a.Run(rctx) }()
	} else {
		s.stderr = &tailBuffer{max: 64 << 10}
		s.cmd = exec.Command(bin, "serve")
		if opts.oneCore {
			s.cmd, s.pinned = oneCoreCommand(bin, "serve")
		}
		s.cmd.Env = append(os.Environ(),
			"MSGMESH_KAFKA_BROKERS="+brokers,
			"MSGMESH_HTTP_ADDR="+addr,
			"MSGMESH_BOOTSTRAP_ADMIN_KEY="+s.key,
			"MSGMESH_KAFKA_TOPIC_PREFIX="+s.prefix,
			"MSGMESH_LOG_LEVEL=warn",
		)
		// The plans' rate limits and monthly quota would cap the benchmark
		// itself (free plan: 100 requests/s, 1000 messages/s): 0 = unlimited.
		for _, plan := range []string{"FREE", "PAID"} {
			for _, k := range []string{"REQUESTS_PER_SECOND", "MESSAGES_PER_SECOND", "MONTHLY_MESSAGES"} {
				s.cmd.Env = append(s.cmd.Env, "MSGMESH_LIMITS_"+plan+"_"+k+"=0")
			}
		}
		if opts.oneCore {
			s.cmd.Env = append(s.cmd.Env, "GOMAXPROCS=1")
		}
		s.cmd.Stdout = s.stderr
		s.cmd.Stderr = s.stderr
		// The server must not outlive this program, whatever happens to it.
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		s.pid = s.cmd.Process.Pid
		s.exited = make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
	}
	deadline := time.Now().Add(readyTimeout)
	cl := &http.Client{Timeout: 3 * time.Second}
	for {
		if s.exited != nil {
			select {
			case <-s.exited:
				return nil, fmt.Errorf("msgmesh exited during startup (%s); its output:\n%s", s.cmd.ProcessState, s.stderr.String())
			default:
			}
		}
		resp, err := cl.Get(s.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			out := ""
			if s.stderr != nil {
				out = s.stderr.String()
			}
			s.stop()
			return nil, fmt.Errorf("msgmesh not ready within %v (last: %v); its output:\n%s", readyTimeout, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createTopic creates a tenant topic and returns its Kafka name. It retries
// while the bootstrap tenant is still being created.
func (s *server) createTopic(name string, partitions int) (string, error) {
	body, _ := json.Marshal(map[string]any{"name": name, "partitions": partitions})
	cl := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/topics", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.key)
		resp, err := cl.Do(req)
		var out struct {
			KafkaTopic string `json:"kafka_topic"`
			Error      string `json:"error"`
			Code       string `json:"code"`
		}
		status := 0
		if err == nil {
			status = resp.StatusCode
			err = json.NewDecoder(resp.Body).Decode(&out)
			_ = resp.Body.Close()
			if err == nil && status == http.StatusCreated && out.KafkaTopic != "" {
				return out.KafkaTopic, nil
			}
			if err == nil {
				err = fmt.Errorf("status %d: %s (%s)", status, out.Error, out.Code)
			}
		}
		if time.Now().After(deadline) || (status >= 400 && status < 500 && status != 401 && status != 403 && status != 404) {
			return "", fmt.Errorf("create topic %s: %w", name, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// cpuSeconds is the user+system CPU the server process used so far (0
// in-process: that CPU is this process's).
func (s *server) cpuSeconds() float64 {
	if s.pid == 0 {
		return 0
	}
	return procCPUSeconds(s.pid)
}

func (s *server) stop() {
	if s.cancel != nil {
		s.cancel()
		select {
		case err := <-s.done:
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: in-process msgmesh stopped with:", err)
			}
		case <-time.After(45 * time.Second):
			fmt.Fprintln(os.Stderr, "bench: in-process msgmesh did not stop within 45s")
		}
		return
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(45 * time.Second):
		fmt.Fprintln(os.Stderr, "bench: msgmesh did not stop within 45s after SIGTERM; killing it")
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return "(no output)"
	}
	return string(t.b)
}
