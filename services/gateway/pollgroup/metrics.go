package pollgroup

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// metrics are the Manager's collectors.
type metrics struct {
	members     prometheus.Gauge
	delivered   prometheus.Counter
	redelivered prometheus.Counter
	commits     *prometheus.CounterVec // labels: kind (poll|explicit), result (ok|error)
	expirations prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "msgmesh", Subsystem: "pollgroup", Name: "members",
			Help: "Consumer-group members (one Kafka client each) held for HTTP long-poll consumers.",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "msgmesh", Subsystem: "pollgroup", Name: "records_delivered_total",
			Help: "Records handed to HTTP consumers and reported Delivered (redeliveries count again).",
		}),
		redelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "msgmesh", Subsystem: "pollgroup", Name: "records_redelivered_total",
			Help: "Records handed out again because the poll after their batch did not acknowledge it.",
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "msgmesh", Subsystem: "pollgroup", Name: "commits_total",
			Help: "Offset commits sent to Kafka, by kind (poll: acknowledgement by polling again; explicit: Commit) and result.",
		}, []string{"kind", "result"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "msgmesh", Subsystem: "pollgroup", Name: "expirations_total",
			Help: "Members closed because they were idle longer than the idle timeout.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.members, m.delivered, m.redelivered, m.commits, m.expirations} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// kgoLogger forwards franz-go's log lines to slog: its Info as Debug (group
// joins and rebalances are chatty with a thousand members), Warn and Error
// as they are. franz-go never logs record contents.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelDebug
	}
	k.l.Log(context.Background(), l, "kgo: "+msg, keyvals...)
}
