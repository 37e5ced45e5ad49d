// Package grouplag measures the Kafka consumer-group lag of every group
// MsgMesh made (poll groups "<prefix>.<tenant>.<topic>.<group>", webhook
// groups "<prefix>.<tenant>.wh.<id>" and the retry groups) and serves it as
// the Prometheus gauge
//
//	msgmesh_group_lag_records{group="<Kafka group>"}
//
// the sum over the group's partitions of the end offset minus the committed
// offset, the figure kafka-consumer-groups.sh --describe shows. It is
// Kafka's view, so it keeps growing when a group's consumers stop polling
// altogether (an Empty group), which no process's own counters can show.
package grouplag

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Monitor measures the groups under a prefix every interval. It is a
// prometheus.Collector serving the last measurement.
type Monitor struct {
	adm      *kadm.Client
	prefix   string
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	lags map[string]int64
}

var desc = prometheus.NewDesc("msgmesh_group_lag_records",
	"Kafka consumer-group lag of each group under kafka.topic_prefix (poll groups, webhook groups): end offset minus committed offset, summed over partitions, as of the last measurement (metrics.group_lag_interval).",
	[]string{"group"}, nil)

// New returns a Monitor of the groups whose names start with prefix+".",
// measured every interval, each measurement bounded by timeout.
func New(adm *kadm.Client, prefix string, interval, timeout time.Duration, log *slog.Logger) *Monitor {
	return &Monitor{adm: adm, prefix: prefix + ".", interval: interval, timeout: timeout, log: log, lags: map[string]int64{}}
}

// Run measures at once and then every interval until ctx ends. A failed
// measurement keeps the previous figures and is logged at warn.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		if err := m.Measure(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("group lag: measuring failed; keeping the last figures", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Measure lists the groups under the prefix and computes their lag.
// Groups that went away are dropped; a group whose lag cannot be computed
// keeps its last figure.
func (m *Monitor) Measure(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	listed, err := m.adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	var groups []string
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, m.prefix) {
			groups = append(groups, g)
		}
	}
	next := make(map[string]int64, len(groups))
	if len(groups) > 0 {
		lags, err := m.adm.Lag(ctx, groups...)
		if err != nil {
			return err
		}
		m.mu.Lock()
		prev := m.lags
		m.mu.Unlock()
		lags.Each(func(l kadm.DescribedGroupLag) {
			if l.Error() != nil {
				if v, ok := prev[l.Group]; ok {
					next[l.Group] = v
				}
				return
			}
			var n int64
			for _, ps := range l.Lag {
				for _, p := range ps {
					if p.Err == nil && p.Lag > 0 {
						n += p.Lag
					}
				}
			}
			next[l.Group] = n
		})
	}
	m.mu.Lock()
	m.lags = next
	m.mu.Unlock()
	return nil
}

// Describe implements prometheus.Collector.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) { ch <- desc }

// Collect implements prometheus.Collector.
func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for g, n := range m.lags {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), g)
	}
}
