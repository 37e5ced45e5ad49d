package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds services/msgmesh once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "msgmesh-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "msgmesh")
		cmd := exec.Command("go", "build", "-o", binPath, "./services/msgmesh")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is a msgmesh subprocess.
type Proc struct {
	URL    string
	Addr   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a free 127.0.0.1:port.
func FreeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// EnvFor is the environment of a msgmesh process of c on addr.
func (c *Cluster) EnvFor(addr string, extra ...string) []string {
	return Env(append([]string{
		"MSGMESH_HTTP_ADDR=" + addr,
		"MSGMESH_KAFKA_BROKERS=" + strings.Join(c.Brokers, ","),
		"MSGMESH_KAFKA_TOPIC_PREFIX=" + c.Prefix,
		"MSGMESH_BOOTSTRAP_ADMIN_KEY=" + c.AdminKey,
		"MSGMESH_OPERATOR_KEY=" + c.OperatorKey,
		"MSGMESH_SECRETS_KEY=" + c.SecretsKey,
		"MSGMESH_POLL_SESSION_TIMEOUT=10s",
		"MSGMESH_POLL_CONSUMER_IDLE_TIMEOUT=8s",
	}, extra...)...)
}

// StartProcess runs `msgmesh serve` with env and waits until ready. The
// process is killed when t ends if still running.
func StartProcess(t testing.TB, addr string, env []string, args ...string) *Proc {
	t.Helper()
	bin := Binary(t)
	p := &Proc{URL: "http://" + addr, Addr: addr, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("msgmesh %s output:\n%s", addr, p.out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("msgmesh exited early: %v\n%s", p.err, p.out.String())
		default:
		}
		if r, err := Client.Get(p.URL + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("msgmesh not ready in 60s:\n%s", p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Terminate sends SIGTERM and returns the exit error (nil = exit 0).
func (p *Proc) Terminate(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("msgmesh did not exit within %v of SIGTERM", timeout)
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process wrote to stdout and stderr.
func (p *Proc) Output() string { return p.out.String() }
