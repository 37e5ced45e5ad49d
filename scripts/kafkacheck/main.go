// Command kafkacheck asks a Kafka cluster for its brokers and exits 0 once it
// answers. scripts/kafka.sh uses it to wait until a freshly started broker
// serves real Kafka requests (an open port is not enough).
//
//	go run ./scripts/kafkacheck -brokers 127.0.0.1:19092
//	go run ./scripts/kafkacheck -brokers 127.0.0.1:19092 -wait 120s
//	go run ./scripts/kafkacheck -brokers 127.0.0.1:19092 -create-topic smoke
//
// It prints one line per broker ("<node id> <host>:<port>"). With -wait it
// retries until the deadline; with -create-topic it also creates that topic
// (an existing topic is fine), for smoke tests against a broker that has
// auto.create.topics.enable=false.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/kafkaclient"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "comma-separated seed brokers")
	timeout := flag.Duration("timeout", 5*time.Second, "timeout of one attempt")
	wait := flag.Duration("wait", 0, "keep retrying until this much time has passed (0 = one attempt)")
	topic := flag.String("create-topic", "", "also create this topic (ok if it exists)")
	partitions := flag.Int("partitions", 1, "partitions of -create-topic")
	quiet := flag.Bool("q", false, "print nothing on success")
	flag.Parse()

	deadline := time.Now().Add(*wait)
	for {
		err := check(strings.Split(*brokers, ","), *timeout, *topic, int32(*partitions), *quiet)
		if err == nil {
			return
		}
		if time.Now().Add(500 * time.Millisecond).After(deadline) {
			fmt.Fprintf(os.Stderr, "kafkacheck: %s: %v\n", *brokers, err)
			os.Exit(1)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func check(seeds []string, timeout time.Duration, topic string, partitions int32, quiet bool) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(timeout),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(timeout),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		return errors.New("metadata lists no broker yet")
	}
	if topic != "" {
		// EnsureTopic returns once the topic's partitions are served, so a
		// smoke test may produce to it at once.
		if _, err := kafkaclient.EnsureTopic(ctx, adm, topic, kafkaclient.TopicSpec{Partitions: partitions}); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	if !quiet {
		for _, b := range bs {
			fmt.Printf("%d %s:%d\n", b.NodeID, b.Host, b.Port)
		}
	}
	return nil
}
