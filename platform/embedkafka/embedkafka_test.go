package embedkafka

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Records and committed offsets survive a restart on the same data dir.
func TestPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := Start(Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("room"), Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, "g", kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: 1}}}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b2, err := Start(Config{Addr: addr[0], DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b2.Addrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	fs := cl2.PollFetches(ctx)
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "hello" || string(recs[0].Key) != "room" {
		t.Fatalf("after restart got %v (errs %v)", recs, fs.Errors())
	}
	offs, err := kadm.NewClient(cl2).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("t", 0); !ok || o.At != 1 {
		t.Fatalf("committed offset after restart = %+v %v, want 1", o, ok)
	}
}

// retention.ms is enforced on the broker's own timer: records older than
// it are deleted without anyone asking.
func TestRetentionApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Start(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), RetentionCheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("short"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ms := "50"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &ms}, "short"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		starts, err := adm.ListStartOffsets(ctx, "short")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := starts.Lookup("short", 0)
		if o.Offset == 1 {
			return // the record aged out
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start offset still %d after 10s; retention.ms=50 was not enforced", o.Offset)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A second broker on a data directory in use fails with ErrDataDirLocked
// naming the holder's pid; after Close the directory can be used again.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(Config{Addr: "127.0.0.1:0", DataDir: dir})
	if !errors.Is(err, ErrDataDirLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Start: %v, want ErrDataDirLocked naming pid %d", err, os.Getpid())
	}
	b.Close()
	b2, err := Start(Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	b2.Close()
}
