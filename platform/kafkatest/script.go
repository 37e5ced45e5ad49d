package kafkatest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Script is a Kafka cluster of its own that scripts/kafka.sh started for
// one test (own ports and data dir, stopped when the test ends), for the
// tests that need what the shared broker does not have: a SASL_SSL
// listener or several nodes.
type Script struct {
	// Brokers are the bootstrap addresses: the SASL_SSL listeners with
	// security "sasl_ssl", else the PLAINTEXT ones.
	Brokers []string
	// Plaintext are the PLAINTEXT listeners (inter-broker; open to anyone).
	Plaintext []string
	// CAFile signs the SASL_SSL listeners' certificates; ClientCert and
	// ClientKey are a client certificate it signed (sasl_ssl only).
	CAFile, ClientCert, ClientKey string
	// Dir is the data dir (logs of node N in Dir/node<N>/logs with
	// several nodes, else Dir/logs).
	Dir   string
	Nodes int
	env   []string
}

// The users scripts/kafka.sh makes with MSGMESH_KAFKA_SECURITY=sasl_ssl
// (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN).
const (
	ScriptUser          = "msgmesh"
	ScriptPassword      = "msgmesh-secret"
	ScriptNoACLUser     = "noacl"
	ScriptNoACLPassword = "noacl-secret"
)

// StartScript starts nodes Kafka nodes with scripts/kafka.sh (security
// "plaintext" or "sasl_ssl") on free ports and a fresh data dir, and stops
// them when t ends. It skips t when the Kafka jars are not in the cache
// (~/.cache/msgmesh/kafka-4.4.0, or MSGMESH_KAFKA_HOME), unless
// MSGMESH_TEST_REQUIRE_REAL_KAFKA=1: then the script fetches them and a
// failure fails t.
func StartScript(t testing.TB, nodes int, security string) *Script {
	t.Helper()
	home := os.Getenv("MSGMESH_KAFKA_HOME")
	if home == "" {
		h, _ := os.UserHomeDir()
		home = filepath.Join(h, ".cache", "msgmesh", "kafka-4.4.0")
	}
	if _, err := os.Stat(filepath.Join(home, "libs", ".complete")); err != nil && os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") != "1" {
		t.Skipf("kafkatest: no Kafka jars in %s (scripts/kafka.sh start fetches them once; MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 makes this test fetch them)", home)
	}
	base := freePorts(t, 3*nodes)
	dir, err := os.MkdirTemp("", "msgmesh-kafka-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Script{Dir: dir, Nodes: nodes}
	s.env = append(os.Environ(),
		"MSGMESH_KAFKA_HOME="+home,
		"MSGMESH_KAFKA_NODES="+strconv.Itoa(nodes),
		"MSGMESH_KAFKA_SECURITY="+security,
		"MSGMESH_KAFKA_PORT="+strconv.Itoa(base),
		"MSGMESH_KAFKA_CONTROLLER_PORT="+strconv.Itoa(base+nodes),
		"MSGMESH_KAFKA_SASL_SSL_PORT="+strconv.Itoa(base+2*nodes),
		"MSGMESH_KAFKA_DATA_DIR="+dir,
		"MSGMESH_KAFKA_START_TIMEOUT=150",
		// small heaps whatever the caller's environment says: several
		// JVMs share a small test machine
		"MSGMESH_KAFKA_HEAP=-Xms128m -Xmx384m",
	)
	t.Cleanup(func() {
		if out, err := s.run("stop"); err != nil {
			t.Logf("kafkatest: scripts/kafka.sh stop: %v\n%s", err, out)
		}
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("kafkatest: kept the broker data and logs in %s", dir)
		}
	})
	t0 := time.Now()
	out, err := s.run("start")
	if err != nil {
		t.Fatalf("kafkatest: scripts/kafka.sh start (%d nodes, %s): %v\n%s", nodes, security, err, out)
	}
	t.Logf("kafkatest: %d-node %s cluster up in %s", nodes, security, time.Since(t0).Round(time.Second))
	b, err := s.run("brokers")
	if err != nil {
		t.Fatal(err)
	}
	s.Brokers = strings.Split(lastLine(b), ",")
	p, _ := s.run("brokers", "plaintext")
	s.Plaintext = strings.Split(lastLine(p), ",")
	if security == "sasl_ssl" {
		s.CAFile = filepath.Join(dir, "security", "ca.pem")
		s.ClientCert = filepath.Join(dir, "security", "client.pem")
		s.ClientKey = filepath.Join(dir, "security", "client-key.pem")
	}
	return s
}

func (s *Script) run(args ...string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Kill ends node (1-based) with SIGKILL, as a crash would.
func (s *Script) Kill(t testing.TB, node int) {
	t.Helper()
	out, err := s.run("pid", strconv.Itoa(node))
	pid, perr := strconv.Atoi(strings.TrimSpace(lastLine(out)))
	if err != nil || perr != nil {
		t.Fatalf("kafkatest: pid of node %d: %v %v\n%s", node, err, perr, out)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kafkatest: kill node %d (pid %d): %v", node, pid, err)
	}
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("kafkatest: node %d (pid %d) still runs after SIGKILL", node, pid)
}

// freePorts finds n consecutive free TCP ports on 127.0.0.1 and returns
// the first.
func freePorts(t testing.TB, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		// below the ephemeral range (32768-60999 on Linux), where outgoing
		// connections would take a port between the check and the bind
		base := 20000 + rand.IntN(12000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("kafkatest: no %d consecutive free ports", n)
	return 0
}
