package integration

import (
	"net/http"
	"strings"
	"testing"

	h "github.com/msgmesh/msgmesh/integration/harness"
)

// A process running only the dispatcher target (split deployments) can be
// probed and scraped like every other: /healthz, /readyz and /metrics with
// the webhook counters, and no API of the other targets. (It had no HTTP
// listener at all, so no readiness probe and no metrics: found by the
// guarantees checker, integration/guarantees.)
func TestDispatcherTargetServesHealthReadinessAndMetrics(t *testing.T) {
	c := h.NewCluster(t)
	addr := h.FreeAddr(t)
	p := h.StartProcess(t, addr, c.EnvFor(addr), "--target=dispatcher") // waits for /readyz 200
	if r := h.Do(t, p.URL, "GET", "/healthz", "", nil); r.Status != http.StatusOK {
		t.Fatalf("/healthz: %d %s", r.Status, r.Body)
	}
	m := h.Do(t, p.URL, "GET", "/metrics", "", nil)
	if m.Status != http.StatusOK || !strings.Contains(string(m.Body), "msgmesh_webhook_dead_letters_total") {
		t.Fatalf("/metrics: %d, no webhook counters:\n%.2000s", m.Status, m.Body)
	}
	if r := h.Do(t, p.URL, "GET", "/v1/topics", c.AdminKey, nil); r.Status != http.StatusNotFound {
		t.Fatalf("GET /v1/topics on a dispatcher: %d %s, want 404 (the control plane's API)", r.Status, r.Body)
	}
}
