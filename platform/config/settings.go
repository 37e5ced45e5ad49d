package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// EnvPrefix starts every configuration variable: key http.addr is
// MSGMESH_HTTP_ADDR.
const EnvPrefix = "MSGMESH_"

// EnvName is the environment variable of key: EnvName("poll.max_wait") is
// "MSGMESH_POLL_MAX_WAIT".
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Setting describes one configuration key, for --help, --verify-config and
// the README's table.
type Setting struct {
	// Key is the viper key (mapstructure tag path), e.g. "poll.max_wait".
	Key string
	// Env is its environment variable, e.g. "MSGMESH_POLL_MAX_WAIT".
	Env string
	// Kind is what the value is: duration, int, number, bool, string or list.
	Kind string
	// Default is the default value, as a flag or variable would spell it.
	Default string
	// Doc says what it means.
	Doc string
}

// settingDocs holds the meaning of every key; a test checks that every
// field of Config has one (add yours here and to README.md's table).
var settingDocs = map[string]string{
	"panel.session_ttl":                      "how long a /panel/ login lasts (the sealed session cookie expires then)",
	"demo.enabled":                           "serve the public live demo at /demo (false: 404 there, nothing created)",
	"demo.tenant":                            "tenant reserved for the demo, created on first use; never give this id to a customer",
	"demo.messages_per_second":               "what the demo's publish box accepts per visitor address per node (burst 5)",
	"http.addr":                              "host:port of the one HTTP listener (every API in all-in-one mode); port 0 picks a free port",
	"http.cors_origins":                      `origins allowed to call the API from a browser ("*", "none" or origins like https://app.example.com, comma-separated)`,
	"http.idle_timeout":                      "idle keep-alive connections are closed after this",
	"http.max_body_bytes":                    "cap of any request body, in bytes (publish has its own, smaller limits)",
	"http.read_header_timeout":               "bound on reading request headers",
	"http.read_timeout":                      "bound on reading a whole request",
	"http.shutdown_timeout":                  "how long in-flight requests may finish after SIGTERM",
	"data_dir":                               "embedded broker data (messages, offsets, control state); locked by the running process",
	"log.level":                              "debug, info, warn or error",
	"log.format":                             "text or json",
	"kafka.brokers":                          "Kafka seed brokers (host:port, comma-separated); empty runs the embedded broker",
	"kafka.embedded_addr":                    "where the embedded broker serves the Kafka protocol (host:port)",
	"kafka.topic_prefix":                     "first part of every Kafka topic and group name MsgMesh makes",
	"kafka.replication_factor":               "replication factor of new topics; -1 = the broker's default",
	"kafka.client_id":                        "client.id sent to Kafka",
	"kafka.min_insync_replicas":              "min.insync.replicas of the topics MsgMesh creates (acknowledged writes are on that many replicas); -1 = the broker's default",
	"kafka.tls.enabled":                      "connect to the brokers with TLS (SSL or SASL_SSL listeners)",
	"kafka.tls.ca_file":                      "PEM file of the CAs that sign the brokers' certificates; empty = the system's roots",
	"kafka.tls.cert_file":                    "PEM client certificate for mutual TLS (with kafka.tls.key_file)",
	"kafka.tls.key_file":                     "PEM private key of kafka.tls.cert_file",
	"kafka.tls.server_name":                  "name checked in the brokers' certificates; empty = the host of each broker address",
	"kafka.sasl.mechanism":                   "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; empty = no SASL",
	"kafka.sasl.username":                    "SASL user (PLAIN, SCRAM); with OAUTHBEARER an optional authorization id",
	"kafka.sasl.password":                    "SASL password, or the bearer token with OAUTHBEARER (masked by --verify-config, never logged)",
	"kafka.request_timeout":                  "bound on admin calls; the longest a publish waits for Kafka before 503",
	"topics.default_partitions":              "partitions of a new topic when the request names none",
	"topics.max_partitions":                  "most partitions a create request may ask for",
	"topics.free_retention":                  "retention.ms of a free tenant's topics",
	"topics.paid_retention":                  "retention.ms of a paid tenant's topics",
	"publish.max_message_bytes":              "one message's payload, in bytes; over = 413",
	"publish.max_batch_bytes":                "one publish request body, in bytes; over = 413",
	"publish.max_batch_messages":             "messages per batch; over = 413",
	"publish.max_room_length":                "a room's length, in bytes; over = 400",
	"publish.max_headers":                    "user headers per message",
	"poll.default_wait":                      "wait_ms when a poll names none",
	"poll.max_wait":                          "cap of wait_ms",
	"poll.default_max":                       "max when a poll names none",
	"poll.max_max":                           "cap of max",
	"poll.default_max_bytes":                 "max_bytes when a poll names none",
	"poll.consumer_idle_timeout":             "a consumer that neither polls nor commits for this long leaves its group",
	"poll.session_timeout":                   "Kafka group session timeout of each poll consumer",
	"poll.max_consumers":                     "poll consumers one process holds; over = 429",
	"tokens.default_ttl":                     "token lifetime when POST /v1/tokens names no ttl_seconds",
	"tokens.max_ttl":                         "cap of ttl_seconds",
	"limits.free.requests_per_second":        "free plan: authenticated calls per second per tenant per process; 0 = unlimited",
	"limits.free.messages_per_second":        "free plan: messages published per second per tenant per process; 0 = unlimited",
	"limits.free.monthly_messages":           "free plan: messages per calendar month (UTC) per tenant, all processes; 0 = unlimited",
	"limits.paid.requests_per_second":        "paid plan: authenticated calls per second per tenant per process; 0 = unlimited",
	"limits.paid.messages_per_second":        "paid plan: messages published per second per tenant per process; 0 = unlimited",
	"limits.paid.monthly_messages":           "paid plan: messages per calendar month (UTC) per tenant, all processes; 0 = unlimited",
	"realtime.replay_window_records":         "how many records behind the end a resume may start; further back: msgmesh-resync",
	"realtime.replay_window_age":             "how old the first missed record of a resume may be; older: msgmesh-resync",
	"realtime.heartbeat":                     "interval of SSE heartbeat comments and WebSocket pings (and credential re-checks)",
	"realtime.retry_hint":                    "the SSE retry: reconnect delay sent to clients",
	"realtime.subscriber_buffer":             "live records one subscriber may have queued before it catches up from Kafka instead",
	"realtime.max_subscribers":               "SSE streams plus WebSocket subscriptions one process holds; over = 429",
	"realtime.max_catchups":                  "subscribers reading Kafka directly at once (resume or catch-up); others wait",
	"realtime.hub_linger":                    "a topic's shared Kafka reader stays open this long after its last subscriber left",
	"realtime.write_timeout":                 "a client that does not read for this long is disconnected (and resumes)",
	"realtime.ws_max_subscriptions":          "subscriptions of one WebSocket connection",
	"realtime.ws_queue_frames":               "queued frames per WebSocket subscription",
	"realtime.token_expiring_lead":           "how long before its token expires a WebSocket gets a token-expiring frame",
	"webhooks.max_attempts":                  "delivery attempts in all for a temporary failure (1..9)",
	"webhooks.attempt_timeout":               "bound on one delivery attempt, connecting included",
	"webhooks.backoff_base":                  "wait before the second attempt; doubles each time, with jitter",
	"webhooks.backoff_max":                   "cap of the wait between attempts",
	"webhooks.concurrency":                   "deliveries in flight per webhook per process",
	"webhooks.retry_partitions":              "partitions of each tenant's webhook retry topic when it is created",
	"webhooks.dlq_partitions":                "partitions of each tenant's dead-letter topic when it is created",
	"webhooks.dlq_retention":                 "retention.ms of the dead-letter topics, whatever the plan",
	"webhooks.session_timeout":               "Kafka session timeout of the dispatcher's consumers (how soon a dead node's webhooks move on)",
	"webhooks.attempt_log":                   "append every delivery attempt to the tenant's attempt log topic (the source of GET /v1/webhooks/{id}/attempts); false: none is appended",
	"webhooks.unsafe_allow_private_targets":  "TEST ONLY: webhooks may target loopback and private addresses (logged loudly)",
	"webhooks.unsafe_ca_file":                "TEST ONLY: a PEM file of extra CAs trusted for webhook TLS (logged loudly)",
	"webhooks.unsafe_test_hold_retry_commit": "TEST ONLY: hold a retry transaction open this long before committing (crash tests; logged loudly)",
	"secrets.key_file":                       "file holding the key-encryption key (32 random bytes, base64 or hex) that seals the control log's secrets; empty: secrets.key, else <data_dir>/secrets.key (made on first start, mode 0600)",
	"secrets.key":                            "the key-encryption key itself instead of a file (masked by --verify-config; prefer secrets.key_file)",
	"secrets.previous_key_files":             "older key-encryption keys, decrypt only (comma-separated): at start every secret they sealed is re-wrapped under the current key",
	"postgres.url":                           "PostgreSQL connection URL of the read model (audit log, webhook attempts; migrations applied at start); empty: a bounded in-memory window (masked by --verify-config)",
	"bootstrap_admin_key":                    "makes sure tenant default exists with this admin key (mm_ and 32+ of [A-Za-z0-9_-]; see msgmesh genkey)",
	"operator_key":                           "may manage tenants and token signing keys; at least 32 characters; empty disables operator calls",
	"metrics.group_lag_interval":             "how often control plane processes measure every consumer group's Kafka lag (msgmesh_group_lag_records); 0 = off",
	"tracing.enabled":                        "OpenTelemetry traces: a span per publish, carried in each record's traceparent header to every poll, SSE, WebSocket and webhook delivery",
	"tracing.otlp_endpoint":                  "OTLP/HTTP collector URL (e.g. http://otel-collector:4318); empty: OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318",
	"tracing.sample_ratio":                   "share of publishes traced (0..1) when the request carries no traceparent of its own; a caller's sampling decision is followed",
	"tracing.service_name":                   "service.name of the exported spans",
}

// Settings lists every configuration key in key order, with its default
// (from Defaults), environment variable, kind and meaning.
func Settings() []Setting {
	var out []Setting
	for key, v := range Flatten(Defaults()) {
		out = append(out, Setting{Key: key, Env: EnvName(key), Kind: kindOf(reflect.TypeOf(v)), Default: FormatValue(v), Doc: settingDocs[key]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Flatten maps every key of c (mapstructure tag paths, e.g.
// "poll.max_wait") to its field's value.
func Flatten(c Config) map[string]any {
	out := map[string]any{}
	walk(reflect.ValueOf(c), "", func(key string, f reflect.Value) { out[key] = f.Interface() })
	return out
}

// Fields maps every key to the addressable field of *c it configures.
func Fields(c *Config) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	walk(reflect.ValueOf(c).Elem(), "", func(key string, f reflect.Value) { out[key] = f })
	return out
}

func walk(v reflect.Value, prefix string, fn func(string, reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("mapstructure")
		if tag == "" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		if f := v.Field(i); f.Kind() == reflect.Struct {
			walk(f, key, fn)
		} else {
			fn(key, f)
		}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

func kindOf(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "int"
	case t.Kind() == reflect.Slice:
		return "list"
	}
	return "string"
}

// KindOf names what the field for key holds (see Setting.Kind).
func KindOf(t reflect.Type) string { return kindOf(t) }

// FormatValue spells v as a flag or variable would: durations like 30s,
// lists comma-separated.
func FormatValue(v any) string {
	switch x := v.(type) {
	case []string:
		return strings.Join(x, ",")
	case time.Duration:
		return formatDuration(x)
	}
	return fmt.Sprint(v)
}

// formatDuration drops time.Duration's zero units: 24h, not 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
