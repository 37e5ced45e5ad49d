// Package embedkafka runs MsgMesh's embedded broker: franz-go's kfake
// in-process, persisted under a data directory and serving the Kafka
// protocol on a real port, so kcat and other Kafka tools work against it.
//
// It is the one-command default (no kafka.brokers configured); production
// points MsgMesh at a real Kafka cluster instead.
package embedkafka

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config configures the embedded broker.
type Config struct {
	// Addr is host:port to serve Kafka on; port 0 picks a free one.
	Addr string
	// DataDir is where records, committed offsets and topic configs are
	// kept across restarts (a "kafka" folder is made inside it). Start takes
	// an exclusive lock on it (msgmesh.lock, holding the pid): a second
	// broker on the same directory fails with ErrDataDirLocked naming the
	// other process instead of corrupting the first one's data.
	DataDir string
	// RetentionCheck is how often retention.ms is enforced; 0 = 1 minute.
	RetentionCheck time.Duration
	Logger         *slog.Logger
}

// Broker is a running embedded broker.
type Broker struct {
	lock *dirLock
	c    *kfake.Cluster
	stop context.CancelFunc
	done chan struct{}
}

// Start starts the broker and returns once it accepts connections.
func Start(cfg Config) (*Broker, error) {
	host, portStr, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: addr %q: %w", cfg.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: port %q: %w", portStr, err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedkafka: data dir: %w", err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()
	dir := filepath.Join(cfg.DataDir, "kafka")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedkafka: data dir: %w", err)
	}
	if cfg.RetentionCheck <= 0 {
		cfg.RetentionCheck = time.Minute
	}
	if port == 0 {
		// kfake needs the port up front: take a free one from the OS.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("embedkafka: pick a port: %w", err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.DataDir(dir),
		kfake.ClusterID("msgmesh-embedded"),
		kfake.BrokerConfigs(map[string]string{
			"log.cleaner.backoff.ms": strconv.FormatInt(cfg.RetentionCheck.Milliseconds(), 10),
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: start on %s: %w", cfg.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{lock: lock, c: c, stop: cancel, done: make(chan struct{})}
	ok = true
	go b.retention(ctx, cfg.RetentionCheck)
	if cfg.Logger != nil {
		cfg.Logger.Info("embedded Kafka broker started", "addr", b.Addrs(), "data_dir", dir)
	}
	return b, nil
}

// retention applies retention.ms and retention.bytes on every topic on a
// timer (kfake only does so for topics whose configs it has seen set).
func (b *Broker) retention(ctx context.Context, every time.Duration) {
	defer close(b.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.c.ApplyRetention()
		}
	}
}

// Addrs are the broker's host:port addresses (seed brokers).
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// ApplyRetention enforces retention now (tests use it).
func (b *Broker) ApplyRetention() { b.c.ApplyRetention() }

// Close stops the broker and flushes its data to disk.
func (b *Broker) Close() {
	b.stop()
	<-b.done
	b.c.Close()
	b.lock.release()
}
