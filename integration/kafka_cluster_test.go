package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// On a three-node cluster (scripts/kafka.sh with MSGMESH_KAFKA_NODES=3,
// SASL_SSL) with kafka.replication_factor=3 and
// kafka.min_insync_replicas=2, one broker killed (SIGKILL) under publish
// and poll load loses no acknowledged message, and publishers and pollers
// see at most a short stall.
func TestKafkaBrokerLoss(t *testing.T) {
	k := kafkatest.StartScript(t, 3, "sasl_ssl")
	if len(k.Brokers) != 3 || len(k.Plaintext) != 3 {
		t.Fatalf("scripts/kafka.sh brokers printed %v (plaintext %v), want three each", k.Brokers, k.Plaintext)
	}
	c := scriptCluster(k.Brokers)
	secure := func(cfg *config.Config) {
		cfg.Kafka.TLS = config.KafkaTLS{Enabled: true, CAFile: k.CAFile}
		cfg.Kafka.SASL = config.KafkaSASL{Mechanism: config.SASLScramSHA256, Username: kafkatest.ScriptUser, Password: kafkatest.ScriptPassword}
		cfg.Kafka.ReplicationFactor = 3
		cfg.Kafka.MinInsyncReplicas = 2
	}
	n := c.Start(t, func(cfg *config.Config) { secure(cfg); harness.Unlimited(cfg) })
	tp := harness.CreateTopic(t, n.URL, c.AdminKey, "load", 3)

	// The topic has three replicas and min.insync.replicas=2.
	kc := n.Cfg.Kafka
	opts, err := kafkaclient.Options(kc, kc.Brokers)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, tp.KafkaTopic)
	if err != nil || td[tp.KafkaTopic].Err != nil {
		t.Fatalf("describe %s: %v %v", tp.KafkaTopic, err, td[tp.KafkaTopic].Err)
	}
	victim := 0 // the leader of partition 0: its loss moves a leader under load
	for _, p := range td[tp.KafkaTopic].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("partition %d has replicas %v, want 3", p.Partition, p.Replicas)
		}
		if p.Partition == 0 {
			victim = int(p.Leader)
		}
	}
	if victim < 1 || victim > 3 {
		t.Fatalf("partition 0 leader %d, want a node 1..3", victim)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, tp.KafkaTopic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On(tp.KafkaTopic, nil); err != nil || configValue(v, "min.insync.replicas") != "2" {
		t.Fatalf("min.insync.replicas of %s = %q (%v), want 2", tp.KafkaTopic, configValue(v, "min.insync.replicas"), err)
	}

	var (
		mu                   sync.Mutex
		acked                = map[int]bool{}
		polled               = map[int]bool{}
		pubStall, pollStall  time.Duration
		pubErrors, pollError int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // publisher: batches of 10, one request at a time
		defer wg.Done()
		last := time.Now()
		for seq := 0; ; seq += 10 {
			select {
			case <-stop:
				return
			default:
			}
			var msgs []map[string]any
			for i := seq; i < seq+10; i++ {
				msgs = append(msgs, map[string]any{"data": map[string]any{"seq": i}})
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			st, _, err := harness.DoE(rctx, n.URL, "POST", "/v1/topics/load/messages", c.AdminKey, map[string]any{"messages": msgs}, "")
			rcancel()
			mu.Lock()
			if err == nil && st == http.StatusOK {
				for i := seq; i < seq+10; i++ {
					acked[i] = true
				}
				pubStall = max(pubStall, time.Since(last))
				last = time.Now()
			} else {
				pubErrors++
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // poller
		defer wg.Done()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			ms, err := harness.PollE(rctx, n.URL, c.AdminKey, "load", harness.PollReq{Group: "g", Consumer: "c1", Max: 200, WaitMs: 500})
			rcancel()
			mu.Lock()
			if err == nil {
				for _, m := range ms {
					polled[seqIn(m)] = true
				}
				pollStall = max(pollStall, time.Since(last))
				last = time.Now()
			} else {
				pollError++
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked), len(polled)
	}
	if ok, _ := harness.PollUntil(20*time.Second, 50*time.Millisecond, func() bool { a, p := count(); return a >= 200 && p >= 100 }); !ok {
		a, p := count()
		t.Fatalf("before the kill: %d acknowledged, %d polled", a, p)
	}
	a0, _ := count()
	t.Logf("killing broker node %d (leader of partition 0) after %d acknowledged messages", victim, a0)
	k.Kill(t, victim)
	// Load goes on: publishes are acknowledged again after the stall.
	if ok, _ := harness.PollUntil(30*time.Second, 50*time.Millisecond, func() bool { a, _ := count(); return a >= a0+300 }); !ok {
		a, _ := count()
		t.Fatalf("after the kill: %d acknowledged (was %d): publishing did not resume", a, a0)
	}
	close(stop)
	wg.Wait()

	// Every acknowledged message is polled.
	var missing []int
	ok, _ := harness.PollUntil(30*time.Second, 0, func() bool {
		ms, err := harness.PollE(context.Background(), n.URL, c.AdminKey, "load", harness.PollReq{Group: "g", Consumer: "c1", Max: 500, WaitMs: 500})
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			for _, m := range ms {
				polled[seqIn(m)] = true
			}
		}
		missing = missing[:0]
		for s := range acked {
			if !polled[s] {
				missing = append(missing, s)
			}
		}
		return len(missing) == 0
	})
	if !ok {
		t.Fatalf("%d of %d acknowledged messages never polled, e.g. %v", len(missing), len(acked), missing[:min(10, len(missing))])
	}
	t.Logf("%d acknowledged, all polled; longest publish stall %v (%d failed requests), longest poll stall %v (%d failed)",
		len(acked), pubStall.Round(time.Millisecond), pubErrors, pollStall.Round(time.Millisecond), pollError)
	const short = 15 * time.Second
	if pubStall > short || pollStall > short {
		t.Fatalf("stall too long: publish %v, poll %v (want at most %v)", pubStall, pollStall, short)
	}
}

// seqIn is seqOf without t (for goroutines): -1 when m has no seq.
func seqIn(m harness.Msg) int {
	var d struct {
		Seq *int `json:"seq"`
	}
	if err := json.Unmarshal(m.Data, &d); err != nil || d.Seq == nil {
		return -1
	}
	return *d.Seq
}

func configValue(rc kadm.ResourceConfig, name string) string {
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
