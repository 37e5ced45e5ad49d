package guarantees

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// TestGuarantees runs the checker in both configurations (three all-in-one
// nodes; split targets in separate processes) and fails on any lost
// acknowledged message, order violation within a room, duplicate off a
// reconnect/redelivery boundary, unwarranted resync or webhook attempt
// count or dead letter that does not match the spec.
//
// MSGMESH_GUARANTEES picks the mode: short (default; inside go test ./...,
// against MSGMESH_TEST_KAFKA_BROKERS), medium, or long (make guarantees:
// a broker of its own via scripts/kafka.sh, restarted as one of the
// faults). MSGMESH_GUARANTEES_SEED replays a run; MSGMESH_GUARANTEES_OUT
// names a file the tables are appended to.
func TestGuarantees(t *testing.T) {
	mode, err := ModeFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MSGMESH_GUARANTEES_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MSGMESH_GUARANTEES_SEED=%q: %v", s, err)
		}
	}
	t.Logf("guarantees: %s mode, seed %d (replay with MSGMESH_GUARANTEES_SEED=%d)", mode.Name, seed, seed)
	var brokers []string
	var restart func()
	if mode.Broker {
		brokers, restart = ownBroker(t)
	} else {
		brokers, _ = kafkatest.Brokers(t)
	}
	var results []Result
	for i, lay := range []layout{allInOne, split} {
		// A subtest per layout: its processes are stopped before the next
		// layout starts.
		t.Run(strings.ReplaceAll(lay.name, " ", "_"), func(t *testing.T) {
			res := runLayout(t, mode, lay, seed+uint64(i), brokers, restart)
			results = append(results, res)
			for _, f := range res.Fail {
				t.Errorf("%s (seed %d): %s", lay.name, res.Seed, f)
			}
		})
	}
	table := Table(mode, results)
	t.Logf("guarantees tables:\n%s", table)
	if out := os.Getenv("MSGMESH_GUARANTEES_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(table); err != nil {
			t.Fatal(err)
		}
	}
}

// ownBroker starts a broker of the checker's own (scripts/kafka.sh on a
// free port and a fresh data dir; never the shared one) and returns its
// address and a function that restarts it.
func ownBroker(t *testing.T) ([]string, func()) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka.sh")
	port := strings.TrimPrefix(h.FreeAddr(t), "127.0.0.1:")
	cport := strings.TrimPrefix(h.FreeAddr(t), "127.0.0.1:")
	env := append(os.Environ(), "MSGMESH_KAFKA_PORT="+port, "MSGMESH_KAFKA_CONTROLLER_PORT="+cport,
		"MSGMESH_KAFKA_DATA_DIR="+t.TempDir())
	sh := func(arg string) {
		cmd := exec.Command(script, arg)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/kafka.sh %s: %v\n%s", arg, err, out)
		}
	}
	sh("start")
	t.Cleanup(func() { sh("stop") })
	return []string{"127.0.0.1:" + port}, func() { sh("stop"); sh("start") }
}
