package integration

import (
	"net/http"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// Every split target, the dispatcher included (it has no API of its own),
// answers the Kubernetes probes and serves its metrics on its listener
// (deployments/kubernetes).
func TestSplitTargetsServeProbesAndMetrics(t *testing.T) {
	c := h.NewCluster(t)
	for target, metric := range map[string]string{
		app.Dispatcher:   "msgmesh_webhook_attempts_total",
		app.Gateway:      "msgmesh_published_messages_total",
		app.Realtime:     "msgmesh_realtime_subscribers",
		app.ControlPlane: "msgmesh_control_log_offset",
	} {
		n := c.Start(t, nil, target) // waits for /readyz 200
		if r := h.Do(t, n.URL, "GET", "/healthz", "", nil); r.Status != http.StatusOK {
			t.Errorf("%s: /healthz %d", target, r.Status)
		}
		r := h.Do(t, n.URL, "GET", "/metrics", "", nil)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "\n"+metric) {
			t.Errorf("%s: /metrics %d lacks %s", target, r.Status, metric)
		}
		_ = n.Stop()
	}
}
