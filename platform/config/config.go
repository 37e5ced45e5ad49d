// Package config holds MsgMesh's configuration: one struct, its defaults,
// and Validate, which reports every problem at once.
//
// Loading (flags > MSGMESH_* environment > file > defaults) happens with
// viper in the msgmesh binary only; this package never reads the
// environment itself. Every key below maps to an environment variable by
// upper-casing it, replacing "." with "_" and prefixing MSGMESH_, for
// example http.addr ↔ MSGMESH_HTTP_ADDR.
package config

import (
	"time"
)

// Config is the root configuration of a msgmesh process.
type Config struct {
	// HTTP is the single listener that serves every API in all-in-one mode.
	HTTP HTTP `mapstructure:"http"`
	// DataDir holds the embedded broker's data (messages, offsets, control
	// state). Unused with an external Kafka. Key data_dir, default "./data".
	DataDir string  `mapstructure:"data_dir"`
	Log     Log     `mapstructure:"log"`
	Kafka   Kafka   `mapstructure:"kafka"`
	Topics  Topics  `mapstructure:"topics"`
	Publish Publish `mapstructure:"publish"`
	Poll    Poll    `mapstructure:"poll"`
	Tokens  Tokens  `mapstructure:"tokens"`
	Limits  Limits  `mapstructure:"limits"`
	// Realtime configures SSE and WebSocket delivery.
	Realtime Realtime `mapstructure:"realtime"`
	// Webhooks configures webhook delivery (the dispatcher).
	Webhooks Webhooks `mapstructure:"webhooks"`
	// Postgres holds the read model (audit log, webhook attempts).
	Postgres Postgres `mapstructure:"postgres"`
	// Secrets configures the key that encrypts the control log's secrets.
	Secrets Secrets `mapstructure:"secrets"`
	// Panel configures the browser panel at /panel/.
	Panel Panel `mapstructure:"panel"`
	// Demo configures the public live demo at /demo.
	Demo Demo `mapstructure:"demo"`
	// Tracing configures OpenTelemetry traces (off by default).
	Tracing Tracing `mapstructure:"tracing"`
	// Metrics configures what /metrics measures beyond the counters.
	Metrics Metrics `mapstructure:"metrics"`
	// BootstrapAdminKey, when set, makes sure tenant "default" exists with
	// this admin key (key bootstrap_admin_key). It must look like a MsgMesh
	// key: "mm_" followed by at least 32 URL-safe characters.
	BootstrapAdminKey string `mapstructure:"bootstrap_admin_key"`
	// OperatorKey may manage tenants (/v1/tenants) and the token signing
	// keys (/v1/signing-keys), nothing inside a tenant. Empty disables
	// operator endpoints. Key operator_key; at least 32 characters.
	OperatorKey string `mapstructure:"operator_key"`
}

// HTTP configures the API listener.
type HTTP struct {
	// Addr is host:port to listen on; default "127.0.0.1:8080". Port 0
	// picks a free port.
	Addr string `mapstructure:"addr"`
	// ReadHeaderTimeout bounds reading request headers; default 10s.
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request; default 60s.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`
	// IdleTimeout closes idle keep-alive connections; default 120s.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests may finish after
	// SIGTERM; default 30s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// MaxBodyBytes caps any request body (bytes); default 16 MiB. Publish
	// has its own, smaller limits.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// CORSOrigins may call the API from a browser (CORS); default ["*"].
	// Credentials are bearer headers, never cookies, so "*" exposes
	// nothing a page could not already send. Each entry is "*" or an
	// origin "scheme://host[:port]"; ["none"] (or empty) disables CORS.
	CORSOrigins []string `mapstructure:"cors_origins"`
}

// Log configures log/slog output on stderr.
type Log struct {
	// Level is debug, info, warn or error; default info.
	Level string `mapstructure:"level"`
	// Format is text or json; default text.
	Format string `mapstructure:"format"`
}

// Kafka configures the broker connection.
type Kafka struct {
	// Brokers are seed brokers (host:port). Empty starts the embedded
	// broker (franz-go kfake) in-process.
	Brokers []string `mapstructure:"brokers"`
	// EmbeddedAddr is where the embedded broker serves the Kafka protocol
	// (so kcat works against it); default "127.0.0.1:9092". Port 0 picks a
	// free port.
	EmbeddedAddr string `mapstructure:"embedded_addr"`
	// TopicPrefix starts every Kafka topic and group name MsgMesh makes:
	// <prefix>.<tenant>.<topic>; default "msgmesh".
	TopicPrefix string `mapstructure:"topic_prefix"`
	// ReplicationFactor for new topics; -1 (default) uses the broker's
	// default.replication.factor.
	ReplicationFactor int `mapstructure:"replication_factor"`
	// ClientID is sent to Kafka; default "msgmesh".
	ClientID string `mapstructure:"client_id"`
	// RequestTimeout bounds admin requests and how long a publish may wait
	// for Kafka before it answers 503; default 10s.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// MinInsyncReplicas is the min.insync.replicas of every topic MsgMesh
	// creates: with acks=all a write is acknowledged once that many
	// replicas have it, and refused (503) while fewer are in sync. -1
	// (default) leaves the broker's default.
	MinInsyncReplicas int `mapstructure:"min_insync_replicas"`
	// TLS encrypts the connections to the brokers.
	TLS KafkaTLS `mapstructure:"tls"`
	// SASL authenticates to the brokers.
	SASL KafkaSASL `mapstructure:"sasl"`
}

// KafkaTLS configures TLS to the brokers (a SSL or SASL_SSL listener).
type KafkaTLS struct {
	// Enabled turns TLS on; default false (plaintext). The other keys
	// only matter when it is true.
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM file of the CAs that sign the brokers' certificates;
	// empty trusts the system's roots (managed clusters).
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key for
	// mutual TLS (ssl.client.auth); both or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName is the name checked in the brokers' certificates; empty
	// uses the host of each broker address.
	ServerName string `mapstructure:"server_name"`
}

// KafkaSASL configures SASL authentication to the brokers.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER;
	// empty (default) disables SASL.
	Mechanism string `mapstructure:"mechanism"`
	// Username is the SASL user (PLAIN, SCRAM); with OAUTHBEARER an
	// optional authorization id.
	Username string `mapstructure:"username"`
	// Password is the user's password (PLAIN, SCRAM) or, with
	// OAUTHBEARER, the bearer token. Never logged; masked by
	// --verify-config.
	Password string `mapstructure:"password"`
}

// SASL mechanism names accepted by kafka.sasl.mechanism (Kafka's own).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
)

// Topics configures tenant topics.
type Topics struct {
	// DefaultPartitions when a create request names none; default 3.
	DefaultPartitions int `mapstructure:"default_partitions"`
	// MaxPartitions a create request may ask for; default 64.
	MaxPartitions int `mapstructure:"max_partitions"`
	// FreeRetention and PaidRetention are the retention.ms of a tenant's
	// topics per plan; defaults 24h and 720h (1 and 30 days).
	FreeRetention time.Duration `mapstructure:"free_retention"`
	PaidRetention time.Duration `mapstructure:"paid_retention"`
}

// Publish configures POST /v1/topics/{topic}/messages.
type Publish struct {
	// MaxMessageBytes caps one message's payload (bytes); default 1 MiB.
	// Over it: 413.
	MaxMessageBytes int `mapstructure:"max_message_bytes"`
	// MaxBatchBytes caps a request body (bytes); default 8 MiB. Over: 413.
	MaxBatchBytes int `mapstructure:"max_batch_bytes"`
	// MaxBatchMessages caps messages per batch; default 1000. Over: 413.
	MaxBatchMessages int `mapstructure:"max_batch_messages"`
	// MaxRoomLength caps a room's length (bytes); default 128. Over: 400.
	MaxRoomLength int `mapstructure:"max_room_length"`
	// MaxHeaders caps user headers per message; default 32.
	MaxHeaders int `mapstructure:"max_headers"`
}

// RecordBatchBytes is the largest record batch MsgMesh produces (bytes):
// the largest payload plus room for the key, headers and batch overhead.
// Tenant topics get it as max.message.bytes and the producer as its batch
// limit, so a payload of exactly MaxMessageBytes is always accepted.
func (p Publish) RecordBatchBytes() int {
	return p.MaxMessageBytes + p.MaxRoomLength + 64<<10
}

// Poll configures long-poll consumer groups.
type Poll struct {
	// DefaultWait is wait_ms when a request names none; default 5s.
	DefaultWait time.Duration `mapstructure:"default_wait"`
	// MaxWait caps wait_ms; default 30s.
	MaxWait time.Duration `mapstructure:"max_wait"`
	// DefaultMax is max records when a request names none; default 100.
	DefaultMax int `mapstructure:"default_max"`
	// MaxMax caps max; default 1000.
	MaxMax int `mapstructure:"max_max"`
	// DefaultMaxBytes is max_bytes when a request names none; default 1 MiB.
	DefaultMaxBytes int `mapstructure:"default_max_bytes"`
	// ConsumerIdleTimeout: a consumer that neither polls nor commits for
	// this long leaves its group, so its partitions (and its unacknowledged
	// batch) move on; default 30s.
	ConsumerIdleTimeout time.Duration `mapstructure:"consumer_idle_timeout"`
	// SessionTimeout is the Kafka group session timeout of each member;
	// default 20s.
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// MaxConsumers caps group members held by one process; default 1000.
	MaxConsumers int `mapstructure:"max_consumers"`
}

// Tokens configures POST /v1/tokens.
type Tokens struct {
	// DefaultTTL when a request names no ttl_seconds; default 15m.
	DefaultTTL time.Duration `mapstructure:"default_ttl"`
	// MaxTTL caps ttl_seconds; default 24h.
	MaxTTL time.Duration `mapstructure:"max_ttl"`
}

// Realtime configures SSE (GET /v1/topics/{topic}/events) and WebSocket
// (GET /v1/ws) delivery.
type Realtime struct {
	// ReplayWindowRecords caps how many records behind the end of a
	// partition a resume may start; further back the stream says
	// msgmesh-resync and continues live. Default 10000.
	ReplayWindowRecords int64 `mapstructure:"replay_window_records"`
	// ReplayWindowAge caps how old the first missed record of a resume may
	// be; older: msgmesh-resync. Default 24h. Resume never reaches past
	// Kafka's retention either way.
	ReplayWindowAge time.Duration `mapstructure:"replay_window_age"`
	// Heartbeat is the interval of SSE comment lines and WebSocket pings,
	// and of re-checking a stream's credential (revocation); default 15s.
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// RetryHint is the SSE "retry:" reconnect delay sent to clients;
	// default 2s.
	RetryHint time.Duration `mapstructure:"retry_hint"`
	// SubscriberBuffer is how many live records one subscriber may have
	// queued; when full it leaves the live feed and catches up from Kafka
	// from its own position (never slowing the others). Default 128.
	SubscriberBuffer int `mapstructure:"subscriber_buffer"`
	// MaxSubscribers caps SSE streams plus WebSocket subscriptions on one
	// process; over it: 429 too_many_subscribers. Default 10000.
	MaxSubscribers int `mapstructure:"max_subscribers"`
	// MaxCatchups caps subscribers reading Kafka directly at once (resume
	// backfill or a slow subscriber catching up); others wait their turn.
	// Default 256.
	MaxCatchups int `mapstructure:"max_catchups"`
	// HubLinger keeps a topic's shared Kafka reader open this long after
	// its last subscriber left; default 5s.
	HubLinger time.Duration `mapstructure:"hub_linger"`
	// WriteTimeout bounds one write to a client; a client that does not
	// read for this long is disconnected (SSE ends; WebSocket close 4008)
	// and resumes with its last id. Default 30s.
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// WSMaxSubscriptions caps subscriptions of one WebSocket; default 100.
	WSMaxSubscriptions int `mapstructure:"ws_max_subscriptions"`
	// WSQueueFrames is each WebSocket subscription's bounded queue of
	// frames waiting for the connection's writer; default 256.
	WSQueueFrames int `mapstructure:"ws_queue_frames"`
	// TokenExpiringLead is how long before a token expires a WebSocket
	// gets a token-expiring frame; default 30s.
	TokenExpiringLead time.Duration `mapstructure:"token_expiring_lead"`
}

// Webhooks configures webhook delivery (spec section 2, "Webhook").
type Webhooks struct {
	// MaxAttempts is how many delivery attempts a message gets in all
	// before it is dead-lettered when every answer is temporary (5xx,
	// timeouts, 3xx, 401, 403, 408, 409, 429, connection errors); the
	// nine permanent codes are dead-lettered on the first attempt. 1..9;
	// default 5 (MSGMESH_WEBHOOKS_MAX_ATTEMPTS).
	MaxAttempts int `mapstructure:"max_attempts"`
	// AttemptTimeout bounds one attempt, connecting included; default 10s
	// (MSGMESH_WEBHOOKS_ATTEMPT_TIMEOUT).
	AttemptTimeout time.Duration `mapstructure:"attempt_timeout"`
	// BackoffBase is the wait before the second attempt; each later one
	// doubles it (with up to 20% jitter), capped at BackoffMax. Defaults
	// 500ms and 8s.
	BackoffBase time.Duration `mapstructure:"backoff_base"`
	BackoffMax  time.Duration `mapstructure:"backoff_max"`
	// Concurrency caps deliveries in flight to one webhook on one process,
	// first attempts and retries together; default 8. First attempts keep
	// one in flight per partition whatever this is.
	Concurrency int `mapstructure:"concurrency"`
	// RetryPartitions and DLQPartitions are the partition counts of each
	// tenant's retry and dead-letter topics when they are created; default 3.
	RetryPartitions int `mapstructure:"retry_partitions"`
	DLQPartitions   int `mapstructure:"dlq_partitions"`
	// DLQRetention is the dead-letter topics' retention.ms, whatever the
	// plan; default 720h (30 days, spec section 2).
	DLQRetention time.Duration `mapstructure:"dlq_retention"`
	// SessionTimeout is the Kafka group session timeout of the
	// dispatcher's consumers: how long partitions of a killed node stay
	// with it before another node takes them over; default 10s
	// (MSGMESH_WEBHOOKS_SESSION_TIMEOUT). Within the brokers'
	// group.min/max.session.timeout.ms (6s..30min by default).
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// AttemptLog appends every delivery attempt to the tenant's attempt
	// log topic (<prefix>.<tenant>.wh.attempt_log), the source of GET
	// /v1/webhooks/{id}/attempts; default true
	// (MSGMESH_WEBHOOKS_ATTEMPT_LOG). false: no attempt is appended (the
	// listing shows none made meanwhile); delivery is the same.
	AttemptLog bool `mapstructure:"attempt_log"`
	// UnsafeAllowPrivateTargets lets webhooks target loopback and private
	// addresses. TEST ONLY: it turns off the SSRF guard's address checks
	// and logs a loud warning at start
	// (MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS).
	UnsafeAllowPrivateTargets bool `mapstructure:"unsafe_allow_private_targets"`
	// UnsafeCAFile is a PEM file of extra CAs trusted for webhook TLS, for
	// local test receivers. TEST ONLY: logs a loud warning at start
	// (MSGMESH_WEBHOOKS_UNSAFE_CA_FILE). Empty trusts the system roots.
	UnsafeCAFile string `mapstructure:"unsafe_ca_file"`
	// UnsafeTestHoldRetryCommit makes the retry consumer wait this long
	// after its transaction's records are written and before it commits,
	// so that a test can kill the process inside that window. TEST ONLY:
	// logs a loud warning at start
	// (MSGMESH_WEBHOOKS_UNSAFE_TEST_HOLD_RETRY_COMMIT). Zero: no wait.
	UnsafeTestHoldRetryCommit time.Duration `mapstructure:"unsafe_test_hold_retry_commit"`
}

// Postgres configures the read model's database (platform/readmodel).
type Postgres struct {
	// URL is a PostgreSQL connection URL (postgres://user:pass@host:port/db,
	// key postgres.url, MSGMESH_POSTGRES_URL). Empty (the default): GET
	// /v1/audit and GET /v1/webhooks/{id}/attempts answer from a bounded
	// in-memory window ("source": "memory").
	URL string `mapstructure:"url"`
}

// Secrets configures the key-encryption key (KEK) that seals the secrets
// the control log holds (token signing seeds, webhook secrets): it never
// enters Kafka, so reading the control topic reveals none of them. A key
// is 32 random bytes as base64 or hex (`openssl rand -base64 32`). Every
// node of a deployment needs the same key; a node that cannot decrypt a
// secret in use refuses to start, naming the key id it lacks.
type Secrets struct {
	// KeyFile is a file holding the current key (key secrets.key_file,
	// MSGMESH_SECRETS_KEY_FILE). Empty: Key, or else the file
	// secrets.key in data_dir, generated on first start (mode 0600); with
	// an external Kafka that is logged as a warning, since the other nodes
	// need a copy of it.
	KeyFile string `mapstructure:"key_file"`
	// Key is the current key itself (MSGMESH_SECRETS_KEY), instead of
	// KeyFile. Prefer a file: environments leak into process listings
	// and crash reports more easily.
	Key string `mapstructure:"key"`
	// PreviousKeyFiles are files of older keys, used only to decrypt. At
	// start the control plane re-wraps every secret sealed under one of
	// them under the current key (new events); afterwards they are no
	// longer needed. Comma-separated in MSGMESH_SECRETS_PREVIOUS_KEY_FILES.
	PreviousKeyFiles []string `mapstructure:"previous_key_files"`
}

// Panel configures the browser panel (/panel/, target panel).
type Panel struct {
	// SessionTTL is how long a login lasts (key panel.session_ttl, default
	// 12h): the session cookie and the sealed session in it expire then.
	SessionTTL time.Duration `mapstructure:"session_ttl"`
}

// Demo configures the public live demo at /demo (target panel): no login,
// a tenant of its own (Tenant) whose only credential the demo holds
// server-side, limited to one topic.
type Demo struct {
	// Enabled serves /demo (key demo.enabled, default true); false answers
	// 404 there and creates nothing.
	Enabled bool `mapstructure:"enabled"`
	// Tenant is the tenant reserved for the demo (default "demo"); it is
	// created on first use. Never give that id to a customer.
	Tenant string `mapstructure:"tenant"`
	// MessagesPerSecond caps what the demo's publish box accepts per
	// visitor address, per node (default 2; burst 5).
	MessagesPerSecond float64 `mapstructure:"messages_per_second"`
}

// Tracing configures OpenTelemetry tracing (W3C Trace Context): a span per
// publish whose context travels in each record's traceparent header through
// Kafka to every delivery (poll answer, SSE event, WebSocket frame, webhook
// POST), exported over OTLP/HTTP.
type Tracing struct {
	// Enabled turns tracing on; default false. Off, no span is made and no
	// traceparent header is written (a publisher's own traceparent header
	// still passes through untouched).
	Enabled bool `mapstructure:"enabled"`
	// OTLPEndpoint is the OTLP/HTTP collector URL, e.g.
	// "http://otel-collector:4318" (the path /v1/traces is added when the
	// URL has none). Empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// or OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318. Collector
	// headers (authentication) come from OTEL_EXPORTER_OTLP_HEADERS.
	OTLPEndpoint string `mapstructure:"otlp_endpoint"`
	// SampleRatio is the share of publishes traced when the publish request
	// carries no sampled traceparent of its own, 0..1; default 1. A
	// request's own sampling decision is always followed (parent-based).
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// ServiceName is the service.name resource attribute; default "msgmesh".
	ServiceName string `mapstructure:"service_name"`
}

// Metrics configures measurements served on /metrics.
type Metrics struct {
	// GroupLagInterval is how often a control plane process measures the
	// Kafka lag of every consumer group under kafka.topic_prefix
	// (msgmesh_group_lag_records); default 30s, 0 turns it off.
	GroupLagInterval time.Duration `mapstructure:"group_lag_interval"`
}

// Limits holds per-plan limits, applied per tenant.
type Limits struct {
	Free PlanLimits `mapstructure:"free"`
	Paid PlanLimits `mapstructure:"paid"`
}

// PlanLimits are one plan's limits. Rates are per tenant on each msgmesh
// process (a deployment of N processes admits up to N times the rate);
// the monthly quota is counted across every process.
type PlanLimits struct {
	// RequestsPerSecond of authenticated /v1 calls; burst is one second's
	// worth. 0 = unlimited.
	RequestsPerSecond float64 `mapstructure:"requests_per_second"`
	// MessagesPerSecond published; burst is one second's worth. 0 =
	// unlimited.
	MessagesPerSecond float64 `mapstructure:"messages_per_second"`
	// MonthlyMessages is the plan's included messages per calendar month
	// (UTC); 0 = unlimited.
	MonthlyMessages int64 `mapstructure:"monthly_messages"`
}

// Plan returns the limits of plan ("free" or "paid").
func (l Limits) Plan(plan string) PlanLimits {
	if plan == "paid" {
		return l.Paid
	}
	return l.Free
}

// Defaults returns the configuration used for every key left unset.
func Defaults() Config {
	return Config{
		HTTP: HTTP{
			Addr:              "127.0.0.1:8080",
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			ShutdownTimeout:   30 * time.Second,
			MaxBodyBytes:      16 << 20,
			CORSOrigins:       []string{"*"},
		},
		DataDir: "./data",
		Log:     Log{Level: "info", Format: "text"},
		Kafka: Kafka{
			EmbeddedAddr:      "127.0.0.1:9092",
			TopicPrefix:       "msgmesh",
			ReplicationFactor: -1,
			MinInsyncReplicas: -1,
			ClientID:          "msgmesh",
			RequestTimeout:    10 * time.Second,
		},
		Topics: Topics{
			DefaultPartitions: 3,
			MaxPartitions:     64,
			FreeRetention:     24 * time.Hour,
			PaidRetention:     30 * 24 * time.Hour,
		},
		Publish: Publish{
			MaxMessageBytes:  1 << 20,
			MaxBatchBytes:    8 << 20,
			MaxBatchMessages: 1000,
			MaxRoomLength:    128,
			MaxHeaders:       32,
		},
		Poll: Poll{
			DefaultWait:         5 * time.Second,
			MaxWait:             30 * time.Second,
			DefaultMax:          100,
			MaxMax:              1000,
			DefaultMaxBytes:     1 << 20,
			ConsumerIdleTimeout: 30 * time.Second,
			SessionTimeout:      20 * time.Second,
			MaxConsumers:        1000,
		},
		Tokens: Tokens{DefaultTTL: 15 * time.Minute, MaxTTL: 24 * time.Hour},
		Panel:  Panel{SessionTTL: 12 * time.Hour},
		Demo:   Demo{Enabled: true, Tenant: "demo", MessagesPerSecond: 2},
		Realtime: Realtime{
			ReplayWindowRecords: 10000,
			ReplayWindowAge:     24 * time.Hour,
			Heartbeat:           15 * time.Second,
			RetryHint:           2 * time.Second,
			SubscriberBuffer:    128,
			MaxSubscribers:      10000,
			MaxCatchups:         256,
			HubLinger:           5 * time.Second,
			WriteTimeout:        30 * time.Second,
			WSMaxSubscriptions:  100,
			WSQueueFrames:       256,
			TokenExpiringLead:   30 * time.Second,
		},
		Webhooks: Webhooks{
			MaxAttempts:     5,
			AttemptTimeout:  10 * time.Second,
			BackoffBase:     500 * time.Millisecond,
			BackoffMax:      8 * time.Second,
			Concurrency:     8,
			RetryPartitions: 3,
			DLQPartitions:   3,
			DLQRetention:    30 * 24 * time.Hour,
			SessionTimeout:  10 * time.Second,
			AttemptLog:      true,
		},
		Tracing: Tracing{SampleRatio: 1, ServiceName: "msgmesh"},
		Metrics: Metrics{GroupLagInterval: 30 * time.Second},
		Limits: Limits{
			Free: PlanLimits{RequestsPerSecond: 100, MessagesPerSecond: 1000, MonthlyMessages: 1_000_000},
			Paid: PlanLimits{RequestsPerSecond: 5000, MessagesPerSecond: 100_000, MonthlyMessages: 1_000_000_000},
		},
	}
}

// Embedded reports whether the process runs the in-process broker.
func (c Config) Embedded() bool { return len(c.Kafka.Brokers) == 0 }
