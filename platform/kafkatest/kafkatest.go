// Package kafkatest gives tests a Kafka broker to talk to.
//
// The broker is chosen once per test binary, in this order:
//
//  1. MSGMESH_TEST_KAFKA_BROKERS (comma-separated host:port), e.g. the
//     single-node Apache Kafka that scripts/kafka.sh starts;
//  2. otherwise, where a Docker engine answers, one Kafka container per
//     test binary from the testcontainers-go Kafka module;
//  3. otherwise franz-go's in-process kfake cluster, one per call.
//
// With MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 (CI sets it) step 3 is refused and
// the test fails: CI must never pass silently on the embedded broker.
// Which broker ran is printed once per test binary ("kafkatest: broker=...").
package kafkatest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kind names the broker a test runs against.
type Kind string

// The broker kinds.
const (
	KindReal     Kind = "real"           // MSGMESH_TEST_KAFKA_BROKERS
	KindDocker   Kind = "testcontainers" // a Kafka container
	KindEmbedded Kind = "embedded"       // in-process kfake
)

var announce sync.Once

// Brokers returns seed brokers for t and which kind they are. A kfake
// cluster is closed when t ends. It calls t.Fatal when a real broker is
// required (MSGMESH_TEST_REQUIRE_REAL_KAFKA=1) and none is configured.
func Brokers(t testing.TB) ([]string, Kind) {
	t.Helper()
	if env := strings.TrimSpace(os.Getenv("MSGMESH_TEST_KAFKA_BROKERS")); env != "" {
		say(KindReal, env)
		return strings.Split(env, ","), KindReal
	}
	if dockerUp() {
		brokers, err := dockerKafka()
		if err != nil {
			t.Fatalf("kafkatest: Docker answers but the Kafka container did not start: %v", err)
		}
		say(KindDocker, strings.Join(brokers, ","))
		return brokers, KindDocker
	}
	if os.Getenv("MSGMESH_TEST_REQUIRE_REAL_KAFKA") == "1" {
		t.Fatal("kafkatest: MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but no real broker: MSGMESH_TEST_KAFKA_BROKERS is empty and no Docker engine answers; start one with scripts/kafka.sh start")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	say(KindEmbedded, strings.Join(c.ListenAddrs(), ","))
	return c.ListenAddrs(), KindEmbedded
}

func say(k Kind, addrs string) {
	announce.Do(func() { fmt.Fprintf(os.Stderr, "kafkatest: broker=%s addrs=%s\n", k, addrs) })
}

// Name returns prefix + "-" + 8 random hex characters: a topic, tenant or
// group name that no other test (or earlier run on a shared broker) uses.
func Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
