package deployments

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"sigs.k8s.io/yaml"

	"github.com/msgmesh/msgmesh/integration/harness"
	"github.com/msgmesh/msgmesh/platform/config"
)

// query is one PromQL expression of the dashboard or the alert rules.
type query struct {
	where string // "dashboard panel ..." or "alert ..."
	expr  string
}

// grafanaPanel is the part of a Grafana panel the check reads.
type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile("grafana/msgmesh-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string         `json:"title"`
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard has no title or uid")
	}
	var out []query
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("dashboard panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("dashboard panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return out
}

// alertRules is a Prometheus rule file (only alerting rules here).
type alertRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func alertQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile("prometheus/msgmesh-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf alertRules
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	var out []query
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || seen[r.Alert]:
				t.Errorf("rule %+v: empty or repeated alert name", r)
			case !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]):
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("alert %s: want a summary and a description", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			seen[r.Alert] = true
			out = append(out, query{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatal("no alert rules")
	}
	return out
}

// promqlFuncs are the PromQL functions and aggregations the queries may
// use: the parser also accepts MetricsQL's extensions, which Prometheus
// would refuse.
var promqlFuncs = map[string]bool{
	"rate": true, "increase": true, "delta": true, "deriv": true, "histogram_quantile": true,
	"sum": true, "max": true, "min": true, "avg": true, "count": true,
}

// rangeFuncs need a range vector argument (a selector with [window]).
var rangeFuncs = map[string]bool{"rate": true, "increase": true, "delta": true, "deriv": true}

// metricNames parses q as PromQL (Grafana's variables replaced) and returns
// the metric names it selects.
func metricNames(q query) ([]string, error) {
	expr := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*").Replace(q.expr)
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad []string
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		switch x := x.(type) {
		case *metricsql.MetricExpr:
			for _, lfs := range x.LabelFilterss {
				for _, lf := range lfs {
					if lf.Label == "__name__" {
						names = append(names, lf.Value)
					}
				}
			}
		case *metricsql.FuncExpr:
			if !promqlFuncs[x.Name] {
				bad = append(bad, x.Name)
			}
			if rangeFuncs[x.Name] {
				if r, ok := x.Args[0].(*metricsql.RollupExpr); !ok || r.Window == nil {
					bad = append(bad, x.Name+" without a [range]")
				}
			}
		case *metricsql.AggrFuncExpr:
			if !promqlFuncs[x.Name] || x.Limit != 0 {
				bad = append(bad, x.Name)
			}
		}
	})
	if len(bad) > 0 {
		return nil, fmt.Errorf("not PromQL: %v", bad)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("selects no metric")
	}
	return names, nil
}

// synthetic names are made by Prometheus itself, not served by /metrics.
var synthetic = map[string]bool{"up": true}

// Every dashboard panel's and alert rule's query is PromQL and names only
// metrics a running node serves on /metrics once its publish, poll,
// SSE, WebSocket and webhook paths were used (the dispatcher's failures
// and a topic deletion included).
func TestDashboardAndAlertQueriesMatchMetrics(t *testing.T) {
	queries := append(dashboardQueries(t), alertQueries(t)...)
	want := map[string][]string{} // metric → where
	for _, q := range queries {
		names, err := metricNames(q)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		for _, n := range names {
			if !synthetic[n] {
				want[n] = append(want[n], q.where)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	c := harness.NewCluster(t)
	rc := harness.NewReceiver(t)
	webhooks := harness.WebhookConfig(t, rc, 2, 2*time.Second, 50*time.Millisecond)
	n := c.Start(t, func(cfg *config.Config) {
		webhooks(cfg)
		cfg.Metrics.GroupLagInterval = time.Second
	})
	key := c.AdminKey
	harness.CreateTopic(t, n.URL, key, "observed", 1)
	harness.CreateTopic(t, n.URL, key, "gone", 1)
	harness.CreateWebhook(t, n.URL, key, "observed", rc.URLFor("", "/ok"), "")
	rc.Answer("/bad", http.StatusBadRequest)
	harness.CreateWebhook(t, n.URL, key, "observed", rc.URLFor("", "/bad"), "")
	// An SSE stream of a topic that is then deleted: msgmesh-closed.
	sse, err := http.NewRequest("GET", n.URL+"/v1/topics/gone/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	sse.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(sse)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE: %v %v", err, resp)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatalf("SSE: %v", err)
	}
	for i := 0; i < 3; i++ {
		harness.Must(t, n.URL, "POST", "/v1/topics/observed/messages", key, map[string]any{"data": i}, http.StatusOK)
	}
	harness.Must(t, n.URL, "DELETE", "/v1/topics/gone", key, nil, http.StatusNoContent)
	closed := make(chan string, 1)
	go func() {
		var all strings.Builder
		for {
			line, err := rd.ReadString('\n')
			all.WriteString(line)
			if err != nil || strings.Contains(line, "msgmesh-closed") {
				closed <- all.String()
				return
			}
		}
	}()
	select {
	case s := <-closed:
		if !strings.Contains(s, "msgmesh-closed") {
			t.Fatalf("SSE of the deleted topic ended without msgmesh-closed: %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SSE of the deleted topic did not end")
	}

	var missing []string
	ok, _ := harness.PollUntil(60*time.Second, 200*time.Millisecond, func() bool {
		// A poll group with a consumer (its lag is a series).
		harness.Poll(t, n.URL, key, "observed", harness.PollReq{Group: "g1", WaitMs: 100})
		served := scrape(t, n.URL)
		missing = missing[:0]
		for m := range want {
			if !served[m] {
				missing = append(missing, m)
			}
		}
		return len(missing) == 0 && len(rc.Got("/bad")) > 0
	})
	if !ok {
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("metric %s (used by %s) is not on /metrics", m, strings.Join(want[m], ", "))
		}
		if len(rc.Got("/bad")) == 0 {
			t.Error("the failing webhook got no attempt")
		}
	}
}

// scrape returns the metric names (series names, e.g. x_bucket) on /metrics.
func scrape(t *testing.T, base string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}
