package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msgmesh/msgmesh/platform/keyring"
)

// FieldError is one configuration problem, naming its key (and so its
// environment variable) and, where there is one, the offending value.
type FieldError struct {
	// Key is the setting, e.g. "poll.max_wait".
	Key string
	// Msg says what is wrong and what is wanted, with the value.
	Msg string
}

func (e *FieldError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s (%s): %s", e.Key, EnvName(e.Key), e.Msg)
}

// problems collects FieldErrors of one section.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// err is the section's problems in key order (SortErrors), nil if none:
// a section reports the same problems in the same order on every run.
func (p problems) err() error { return SortErrors(p...) }

// SortErrors flattens joined errors and orders them by key (then text),
// so that every run reports the same problems in the same order; nil if
// there are none.
func SortErrors(errs ...error) error {
	var flat []error
	var visit func(error)
	visit = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				visit(e)
			}
			return
		}
		flat = append(flat, err)
	}
	for _, e := range errs {
		visit(e)
	}
	key := func(err error) string {
		var fe *FieldError
		if errors.As(err, &fe) {
			return fe.Key
		}
		return ""
	}
	sort.SliceStable(flat, func(i, j int) bool {
		if ki, kj := key(flat[i]), key(flat[j]); ki != kj {
			return ki < kj
		}
		return flat[i].Error() < flat[j].Error()
	})
	return errors.Join(flat...)
}

var (
	prefixRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	keyRE    = regexp.MustCompile(`^mm_[A-Za-z0-9_-]{32,}$`)
)

// demoTenantRE is names.Tenant's rule (config does not import names).
var demoTenantRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate checks every section (each with its own Validate) and the
// root keys, and returns all problems joined (nil if none), each a
// *FieldError naming its key, in key order.
func (c Config) Validate() error {
	var p problems
	if c.Embedded() && c.DataDir == "" {
		p.add("data_dir", "must be set when the embedded broker runs (kafka.brokers empty)")
	}
	if c.BootstrapAdminKey != "" && !keyRE.MatchString(c.BootstrapAdminKey) {
		p.add("bootstrap_admin_key", `want "mm_" followed by at least 32 of [A-Za-z0-9_-] (msgmesh genkey prints one)`)
	}
	if c.OperatorKey != "" && len(c.OperatorKey) < 32 {
		p.add("operator_key", "must be at least 32 characters, got %d", len(c.OperatorKey))
	}
	return SortErrors(p.err(), c.HTTP.Validate(), c.Log.Validate(), c.Kafka.Validate(), c.Topics.Validate(),
		c.Publish.Validate(), c.Poll.Validate(), c.Tokens.Validate(), c.Limits.Validate(),
		c.Realtime.Validate(), c.Webhooks.Validate(), c.Secrets.Validate(), c.Tracing.Validate(), c.Metrics.Validate(), c.Postgres.Validate(),
		c.Panel.Validate(), c.Demo.Validate())
}

// Validate checks panel.*.
func (pn Panel) Validate() error {
	var p problems
	if pn.SessionTTL < time.Minute {
		p.add("panel.session_ttl", "must be at least 1m, got %s", pn.SessionTTL)
	}
	return p.err()
}

// Validate checks demo.* (only when the demo is enabled).
func (d Demo) Validate() error {
	var p problems
	if d.Enabled {
		if !demoTenantRE.MatchString(d.Tenant) {
			p.add("demo.tenant", "want a tenant id (1-63 of [a-z0-9-]), got %q", d.Tenant)
		}
		if !(d.MessagesPerSecond > 0) {
			p.add("demo.messages_per_second", "must be positive, got %v", d.MessagesPerSecond)
		}
	}
	return p.err()
}

// Validate checks the tracing settings.
func (t Tracing) Validate() error {
	var p problems
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		p.add("tracing.sample_ratio", "want 0..1, got %v", t.SampleRatio)
	}
	if t.OTLPEndpoint != "" {
		if u, err := url.Parse(t.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("tracing.otlp_endpoint", "want an http:// or https:// URL such as http://otel-collector:4318, got %q", t.OTLPEndpoint)
		}
	}
	if t.Enabled && t.ServiceName == "" {
		p.add("tracing.service_name", "must be set when tracing is enabled")
	}
	return p.err()
}

// Validate checks the metrics settings.
func (m Metrics) Validate() error {
	var p problems
	if m.GroupLagInterval != 0 && m.GroupLagInterval < time.Second {
		p.add("metrics.group_lag_interval", "want 0 (off) or at least 1s, got %v", m.GroupLagInterval)
	}
	return p.err()
}

// Validate checks postgres.*.
func (pg Postgres) Validate() error {
	var p problems
	if pg.URL != "" {
		u, err := url.Parse(pg.URL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			p.add("postgres.url", "want a URL postgres://user[:password]@host[:port]/database[?sslmode=...]")
		}
	}
	return p.err()
}

// Validate checks the key-encryption key settings.
func (s Secrets) Validate() error {
	var p problems
	if s.Key != "" && s.KeyFile != "" {
		p.add("secrets.key", "set either secrets.key or secrets.key_file, not both")
	}
	if s.Key != "" {
		if _, err := keyring.ParseKey([]byte(s.Key)); err != nil {
			p.add("secrets.key", "%v", err)
		}
	}
	for _, f := range s.PreviousKeyFiles {
		if f == "" {
			p.add("secrets.previous_key_files", "empty file name")
		}
	}
	return p.err()
}

// checkAddr refuses what net.Listen would: host:port with a numeric port
// 0..65535 (or 1..65535 when a port is required to dial).
func checkAddr(p *problems, key, addr string, dial bool) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(key, "want host:port, got %q", addr)
		return
	}
	n, err := strconv.Atoi(port)
	lo := 0
	if dial {
		lo = 1
	}
	if err != nil || n < lo || n > 65535 {
		p.add(key, "want a port number %d..65535, got %q in %q", lo, port, addr)
	}
}

func positive(p *problems, durations map[string]time.Duration) {
	for k, d := range durations {
		if d <= 0 {
			p.add(k, "must be a positive duration, got %v", d)
		}
	}
}

func positiveInts(p *problems, ints map[string]int) {
	for k, v := range ints {
		if v <= 0 {
			p.add(k, "must be positive, got %d", v)
		}
	}
}

// Validate checks http.*.
func (h HTTP) Validate() error {
	var p problems
	checkAddr(&p, "http.addr", h.Addr, false)
	positive(&p, map[string]time.Duration{
		"http.read_header_timeout": h.ReadHeaderTimeout, "http.read_timeout": h.ReadTimeout,
		"http.idle_timeout": h.IdleTimeout, "http.shutdown_timeout": h.ShutdownTimeout,
	})
	for _, o := range h.CORSOrigins {
		if o == "*" || (o == "none" && len(h.CORSOrigins) == 1) {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			p.add("http.cors_origins", "want \"*\", \"none\" or origins like https://app.example.com, got %q", o)
		}
	}
	if h.MaxBodyBytes <= 0 {
		p.add("http.max_body_bytes", "must be positive, got %d", h.MaxBodyBytes)
	}
	return p.err()
}

// Validate checks log.*.
func (l Log) Validate() error {
	var p problems
	switch strings.ToLower(l.Level) {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "want debug, info, warn or error, got %q", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		p.add("log.format", "want text or json, got %q", l.Format)
	}
	return p.err()
}

// Validate checks kafka.*; embedded_addr only matters (and is only
// checked) when brokers is empty.
func (k Kafka) Validate() error {
	var p problems
	if len(k.Brokers) == 0 {
		checkAddr(&p, "kafka.embedded_addr", k.EmbeddedAddr, false)
	}
	for _, b := range k.Brokers {
		checkAddr(&p, "kafka.brokers", b, true)
	}
	if !prefixRE.MatchString(k.TopicPrefix) {
		p.add("kafka.topic_prefix", "want 1-32 of [a-z0-9_-] starting with a letter, got %q", k.TopicPrefix)
	}
	if k.ReplicationFactor == 0 || k.ReplicationFactor < -1 || k.ReplicationFactor > 32767 {
		p.add("kafka.replication_factor", "want -1 (broker default) or 1..32767, got %d", k.ReplicationFactor)
	}
	if k.MinInsyncReplicas == 0 || k.MinInsyncReplicas < -1 || k.MinInsyncReplicas > 32767 {
		p.add("kafka.min_insync_replicas", "want -1 (broker default) or 1..32767, got %d", k.MinInsyncReplicas)
	} else if k.MinInsyncReplicas > 0 && k.ReplicationFactor > 0 && k.MinInsyncReplicas > k.ReplicationFactor {
		p.add("kafka.min_insync_replicas", "want at most kafka.replication_factor (%d), got %d: no write could be acknowledged", k.ReplicationFactor, k.MinInsyncReplicas)
	}
	positive(&p, map[string]time.Duration{"kafka.request_timeout": k.RequestTimeout})
	k.validateSecurity(&p)
	return p.err()
}

// validateSecurity checks kafka.tls.* and kafka.sasl.*.
func (k Kafka) validateSecurity(p *problems) {
	t, s := k.TLS, k.SASL
	embedded := len(k.Brokers) == 0
	if embedded && t.Enabled {
		p.add("kafka.tls.enabled", "the embedded broker serves plaintext only; set kafka.brokers to use TLS")
	}
	if embedded && s.Mechanism != "" {
		p.add("kafka.sasl.mechanism", "the embedded broker does not authenticate; set kafka.brokers to use SASL")
	}
	if !t.Enabled {
		for key, v := range map[string]string{"kafka.tls.ca_file": t.CAFile, "kafka.tls.cert_file": t.CertFile,
			"kafka.tls.key_file": t.KeyFile, "kafka.tls.server_name": t.ServerName} {
			if v != "" {
				p.add(key, "is set but kafka.tls.enabled is false (set it to true to use TLS)")
			}
		}
	} else {
		if (t.CertFile == "") != (t.KeyFile == "") {
			p.add("kafka.tls.cert_file", "kafka.tls.cert_file and kafka.tls.key_file go together (mutual TLS): set both or neither")
		}
		for key, f := range map[string]string{"kafka.tls.ca_file": t.CAFile, "kafka.tls.cert_file": t.CertFile, "kafka.tls.key_file": t.KeyFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				p.add(key, "cannot read %s: %v", f, errors.Unwrap(err))
			}
		}
	}
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.Password != "" {
			p.add("kafka.sasl.mechanism", "kafka.sasl.username or password is set but no mechanism: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.Username == "" {
			p.add("kafka.sasl.username", "must be set with kafka.sasl.mechanism %s", s.Mechanism)
		}
		if s.Password == "" {
			p.add("kafka.sasl.password", "must be set with kafka.sasl.mechanism %s", s.Mechanism)
		}
	case SASLOAuthBearer:
		if s.Password == "" {
			p.add("kafka.sasl.password", "must hold the bearer token with kafka.sasl.mechanism OAUTHBEARER")
		}
	default:
		p.add("kafka.sasl.mechanism", "want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kafka's names, upper case), got %q", s.Mechanism)
	}
}

// Validate checks topics.*.
func (t Topics) Validate() error {
	var p problems
	if t.DefaultPartitions < 1 || t.DefaultPartitions > t.MaxPartitions {
		p.add("topics.default_partitions", "want 1..topics.max_partitions (%d), got %d", t.MaxPartitions, t.DefaultPartitions)
	}
	if t.MaxPartitions < 1 || t.MaxPartitions > 10000 {
		p.add("topics.max_partitions", "want 1..10000, got %d", t.MaxPartitions)
	}
	positive(&p, map[string]time.Duration{"topics.free_retention": t.FreeRetention, "topics.paid_retention": t.PaidRetention})
	return p.err()
}

// Validate checks publish.*.
func (pb Publish) Validate() error {
	var p problems
	positiveInts(&p, map[string]int{
		"publish.max_message_bytes": pb.MaxMessageBytes, "publish.max_batch_bytes": pb.MaxBatchBytes,
		"publish.max_batch_messages": pb.MaxBatchMessages, "publish.max_room_length": pb.MaxRoomLength,
		"publish.max_headers": pb.MaxHeaders,
	})
	if pb.MaxMessageBytes > pb.MaxBatchBytes {
		p.add("publish.max_message_bytes", "must not exceed publish.max_batch_bytes (%d), got %d", pb.MaxBatchBytes, pb.MaxMessageBytes)
	}
	return p.err()
}

// Validate checks poll.*.
func (pl Poll) Validate() error {
	var p problems
	positive(&p, map[string]time.Duration{
		"poll.max_wait": pl.MaxWait, "poll.consumer_idle_timeout": pl.ConsumerIdleTimeout, "poll.session_timeout": pl.SessionTimeout,
	})
	if pl.DefaultWait < 0 || pl.DefaultWait > pl.MaxWait {
		p.add("poll.default_wait", "must be between 0 and poll.max_wait (%v), got %v", pl.MaxWait, pl.DefaultWait)
	}
	positiveInts(&p, map[string]int{
		"poll.default_max": pl.DefaultMax, "poll.max_max": pl.MaxMax,
		"poll.default_max_bytes": pl.DefaultMaxBytes, "poll.max_consumers": pl.MaxConsumers,
	})
	if pl.DefaultMax > pl.MaxMax {
		p.add("poll.default_max", "must not exceed poll.max_max (%d), got %d", pl.MaxMax, pl.DefaultMax)
	}
	return p.err()
}

// Validate checks tokens.*.
func (t Tokens) Validate() error {
	var p problems
	if t.DefaultTTL <= 0 || t.DefaultTTL > t.MaxTTL {
		p.add("tokens.default_ttl", "want a positive duration up to tokens.max_ttl (%v), got %v", t.MaxTTL, t.DefaultTTL)
	}
	return p.err()
}

// Validate checks limits.*.
func (l Limits) Validate() error {
	var p problems
	for name, pl := range map[string]PlanLimits{"limits.free": l.Free, "limits.paid": l.Paid} {
		if pl.RequestsPerSecond < 0 || math.IsNaN(pl.RequestsPerSecond) {
			p.add(name+".requests_per_second", "must be 0 (unlimited) or positive, got %v", pl.RequestsPerSecond)
		}
		if pl.MessagesPerSecond < 0 || math.IsNaN(pl.MessagesPerSecond) {
			p.add(name+".messages_per_second", "must be 0 (unlimited) or positive, got %v", pl.MessagesPerSecond)
		}
		if pl.MonthlyMessages < 0 {
			p.add(name+".monthly_messages", "must be 0 (unlimited) or positive, got %d", pl.MonthlyMessages)
		}
	}
	return p.err()
}

// Validate checks realtime.*.
func (r Realtime) Validate() error {
	var p problems
	positive(&p, map[string]time.Duration{
		"realtime.replay_window_age": r.ReplayWindowAge, "realtime.heartbeat": r.Heartbeat,
		"realtime.retry_hint": r.RetryHint, "realtime.hub_linger": r.HubLinger,
		"realtime.write_timeout": r.WriteTimeout, "realtime.token_expiring_lead": r.TokenExpiringLead,
	})
	positiveInts(&p, map[string]int{
		"realtime.subscriber_buffer": r.SubscriberBuffer, "realtime.max_subscribers": r.MaxSubscribers,
		"realtime.max_catchups": r.MaxCatchups, "realtime.ws_max_subscriptions": r.WSMaxSubscriptions,
		"realtime.ws_queue_frames": r.WSQueueFrames,
	})
	if r.ReplayWindowRecords <= 0 {
		p.add("realtime.replay_window_records", "must be positive, got %d", r.ReplayWindowRecords)
	}
	return p.err()
}

// Validate checks webhooks.*.
func (w Webhooks) Validate() error {
	var p problems
	if w.MaxAttempts < 1 || w.MaxAttempts > 9 {
		p.add("webhooks.max_attempts", "want 1..9 (the spec's single-digit retry count), got %d", w.MaxAttempts)
	}
	positive(&p, map[string]time.Duration{
		"webhooks.attempt_timeout": w.AttemptTimeout, "webhooks.backoff_base": w.BackoffBase,
		"webhooks.backoff_max": w.BackoffMax, "webhooks.dlq_retention": w.DLQRetention,
		"webhooks.session_timeout": w.SessionTimeout,
	})
	if w.BackoffMax < w.BackoffBase {
		p.add("webhooks.backoff_max", "must not be below webhooks.backoff_base (%v), got %v", w.BackoffBase, w.BackoffMax)
	}
	positiveInts(&p, map[string]int{
		"webhooks.concurrency": w.Concurrency, "webhooks.retry_partitions": w.RetryPartitions,
		"webhooks.dlq_partitions": w.DLQPartitions,
	})
	if w.UnsafeTestHoldRetryCommit < 0 {
		p.add("webhooks.unsafe_test_hold_retry_commit", "must be 0 (off) or positive, got %v", w.UnsafeTestHoldRetryCommit)
	}
	return p.err()
}
