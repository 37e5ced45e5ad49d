package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// Two consumers of one group split a 4-partition topic: once the group is
// stable each reads its own partitions, and together they get every
// message.
func TestDataPathTwoConsumersSplitPartitions(t *testing.T) {
	const (
		topic, group = "split", "g-split"
		partitions   = 4
		total        = 400
	)
	c := h.NewCluster(t)
	n := c.Start(t, nil)
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, topic, partitions)
	consumers := []string{"c1", "c2"}

	// Both consumers join (empty polls) until Kafka shows a stable group of
	// two members holding two partitions each.
	adm := c.Admin(t)
	kgroup := c.KafkaGroup(topic, group)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var wg sync.WaitGroup
		for _, cn := range consumers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = h.PollE(context.Background(), n.URL, key, topic, h.PollReq{Group: group, Consumer: cn, WaitMs: 500})
			}()
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		dg, err := adm.DescribeGroups(ctx, kgroup)
		cancel()
		g := dg[kgroup]
		if err == nil && g.Err == nil && g.State == "Stable" && len(g.Members) == 2 {
			ok := true
			for _, m := range g.Members {
				a, isConsumer := m.Assigned.AsConsumer()
				if !isConsumer || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != partitions/2 {
					ok = false
				}
			}
			if ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not stable with 2 members of %d partitions each after 60s: %+v (err %v)", kgroup, partitions/2, g, err)
		}
	}

	// Rooms spread over every partition.
	var msgs []map[string]any
	for i := range total {
		msgs = append(msgs, map[string]any{"room": fmt.Sprintf("room-%d", i%40), "data": i})
	}
	ans := h.Must(t, n.URL, "POST", "/v1/topics/"+topic+"/messages", key, map[string]any{"messages": msgs}, 200).JSON(t)
	published := map[string]bool{}
	pubParts := map[string]bool{}
	for _, c := range ans["cursors"].([]any) {
		published[c.(string)] = true
		pubParts[strings.SplitN(c.(string), "-", 2)[0]] = true
	}
	if len(published) != total || len(pubParts) != partitions {
		t.Fatalf("publish gave %d distinct cursors over partitions %v, want %d over %d", len(published), slices.Sorted(maps.Keys(pubParts)), total, partitions)
	}

	// Both poll concurrently until together they have everything.
	var (
		mu    sync.Mutex
		union = map[string]bool{}
		got   = map[string][]h.Msg{}
		errs  = make(chan error, len(consumers))
		wg    sync.WaitGroup
	)
	stop := time.Now().Add(60 * time.Second)
	for _, cn := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(union) == total
				mu.Unlock()
				if done {
					// acknowledge the last batch
					_, _ = h.PollE(context.Background(), n.URL, key, topic, h.PollReq{Group: group, Consumer: cn, WaitMs: 100})
					return
				}
				if time.Now().After(stop) {
					errs <- fmt.Errorf("%s: gave up after 60s", cn)
					return
				}
				ms, err := h.PollE(context.Background(), n.URL, key, topic, h.PollReq{Group: group, Consumer: cn, Max: 50, WaitMs: 1000})
				if err != nil {
					errs <- fmt.Errorf("%s: %v", cn, err)
					return
				}
				mu.Lock()
				for _, m := range ms {
					union[m.Cursor] = true
				}
				got[cn] = append(got[cn], ms...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for cur := range published {
		if !union[cur] {
			t.Errorf("cursor %s was published but neither consumer got it", cur)
		}
	}
	for cur := range union {
		if !published[cur] {
			t.Errorf("cursor %s was polled but never published", cur)
		}
	}
	parts := map[string]map[int32]bool{}
	for _, cn := range consumers {
		parts[cn] = map[int32]bool{}
		for _, m := range got[cn] {
			parts[cn][m.Pos(t).Partition] = true
		}
		if len(got[cn]) == 0 {
			t.Errorf("%s got no message: the partitions were not split", cn)
		}
	}
	for p := range parts["c1"] {
		if parts["c2"][p] {
			t.Errorf("partition %d was read by both consumers of a stable group (c1 %v, c2 %v)", p, slices.Sorted(maps.Keys(parts["c1"])), slices.Sorted(maps.Keys(parts["c2"])))
		}
	}
	t.Logf("c1: %d messages from partitions %v; c2: %d from %v", len(got["c1"]), slices.Sorted(maps.Keys(parts["c1"])), len(got["c2"]), slices.Sorted(maps.Keys(parts["c2"])))
}
