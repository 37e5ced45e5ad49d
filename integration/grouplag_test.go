package integration

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// msgmesh_group_lag_records{group} is the poll group's Kafka lag (end
// offset minus committed offset): it follows acknowledgements, and keeps
// growing when nobody polls.
func TestGroupLagMetric(t *testing.T) {
	c := h.NewCluster(t)
	n := c.Start(t, func(cfg *config.Config) { cfg.Metrics.GroupLagInterval = time.Second })
	key := c.AdminKey
	h.CreateTopic(t, n.URL, key, "lagged", 1)
	publish := func(k int) {
		for i := 0; i < k; i++ {
			h.Must(t, n.URL, "POST", "/v1/topics/lagged/messages", key, map[string]any{"data": i}, http.StatusOK)
		}
	}
	publish(5)
	group := c.KafkaGroup("lagged", "g1")
	lagRE := regexp.MustCompile(`(?m)^msgmesh_group_lag_records\{group="` + regexp.QuoteMeta(group) + `"\} (\d+)$`)
	lag := func() int {
		m := lagRE.FindSubmatch(h.Do(t, n.URL, "GET", "/metrics", "", nil).Body)
		if m == nil {
			return -1
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	waitLag := func(want int) {
		t.Helper()
		if ok, _ := h.PollUntil(20*time.Second, 100*time.Millisecond, func() bool { return lag() == want }); !ok {
			t.Fatalf("msgmesh_group_lag_records of %s is %d, want %d", group, lag(), want)
		}
	}
	if got := len(h.Poll(t, n.URL, key, "lagged", h.PollReq{Group: "g1", Max: 2, WaitMs: 5000})); got != 2 {
		t.Fatalf("first poll: %d messages, want 2", got)
	}
	waitLag(5) // nothing acknowledged yet
	if got := len(h.Poll(t, n.URL, key, "lagged", h.PollReq{Group: "g1", Max: 10, WaitMs: 5000})); got != 3 {
		t.Fatalf("second poll: %d messages, want 3", got)
	}
	waitLag(3) // the first batch acknowledged
	h.Poll(t, n.URL, key, "lagged", h.PollReq{Group: "g1", Max: 10, WaitMs: 200})
	waitLag(0)
	publish(4) // nobody polls any more
	waitLag(4)
}
