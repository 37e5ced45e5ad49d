// Package kafkaclient builds the franz-go options that every Kafka client
// of a msgmesh process starts from (seed brokers, client id, timeouts,
// TLS and SASL), and tells a broker that refuses MsgMesh (wrong password,
// untrusted certificate, a plaintext listener, a missing ACL) from one
// that is merely unreachable.
//
// Every package that makes a kgo.Client or kadm.Client appends its own
// options to the ones Options returns (With copies them), so TLS and SASL
// reach all of them: the control log, limits, the gateway's producer and
// poll groups, the realtime readers and the dispatcher.
//
// It is also MsgMesh's one Kafka toolkit: EnsureTopic makes a topic when
// missing, and Follow reads a topic to its end, reports it caught up, then
// follows it (the control log and the usage counts read that way).
package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/msgmesh/msgmesh/platform/config"
)

// Options returns the client options for brokers under k: seed brokers,
// client id, the request timeout overhead and, when configured, TLS
// (kafka.tls.*) and SASL (kafka.sasl.*). It reads the TLS files, so an
// unreadable or malformed file is reported here, at startup.
func Options(k config.Kafka, brokers []string) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(k.ClientID)}
	if k.RequestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(k.RequestTimeout))
	}
	if k.TLS.Enabled {
		tc, err := TLSConfig(k.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if k.SASL.Mechanism != "" {
		m, err := Mechanism(k.SASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// TLSConfig builds the TLS client configuration of kafka.tls.*: the CA
// file's roots (else the system's), the client certificate, the server
// name (else each broker's host, which franz-go fills in), TLS 1.2+.
func TLSConfig(t config.KafkaTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Mechanism returns the franz-go SASL mechanism of kafka.sasl.*.
func Mechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case config.SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case config.SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case config.SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	case config.SASLOAuthBearer:
		return oauth.Auth{Token: s.Password, Zid: s.Username}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unknown mechanism %q", s.Mechanism)
}

// RefusedError is a failure that retrying cannot fix: the brokers
// answered but refused MsgMesh's credentials, certificate or rights, or
// speak another protocol on that port. Reason names the class, Hint what
// to check.
type RefusedError struct {
	Reason string // "authentication", "tls", "plaintext_listener", "tls_listener", "authorization"
	Hint   string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("Kafka refused the connection (%s): %v; %s", e.Reason, e.Err, e.Hint)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Classify returns err as a *RefusedError when it is one that retrying
// cannot fix (see RefusedError), else err unchanged (nil stays nil).
// tlsOn says whether kafka.tls.enabled is set, which tells a plaintext
// listener from a TLS one on an early EOF.
func Classify(err error, tlsOn bool) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*RefusedError](err); ok {
		return err
	}
	refused := func(reason, hint string) error { return &RefusedError{Reason: reason, Hint: hint, Err: err} }
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return refused("authentication", "check kafka.sasl.username, kafka.sasl.password and kafka.sasl.mechanism (MSGMESH_KAFKA_SASL_*)")
	case errors.Is(err, kerr.IllegalSaslState):
		return refused("authentication", "the listener does not take SASL: use its SASL_SSL/SASL_PLAINTEXT port or unset kafka.sasl.mechanism")
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return refused("authentication", "the listener does not offer kafka.sasl.mechanism; use one it lists")
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.DelegationTokenAuthorizationFailed):
		return refused("authorization", "grant the SASL user ACLs on the topics and groups that start with kafka.topic_prefix (README: Secured clusters)")
	}
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &hostErr):
		return refused("tls", "the broker's certificate does not name this host: fix kafka.brokers or set kafka.tls.server_name")
	case errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &verify):
		return refused("tls", "the broker's certificate is not trusted: set kafka.tls.ca_file to the CA that signed it")
	case errors.As(err, &header):
		return refused("plaintext_listener", "the listener did not answer with TLS: is kafka.brokers a plaintext listener?")
	}
	// A plaintext client on a TLS listener reads the broker's TLS alert as
	// an oversized response (franz-go says so in the message).
	if !tlsOn && strings.Contains(err.Error(), "plaintext connection speaking to a tls endpoint") {
		return refused("tls_listener", "the listener speaks TLS: set kafka.tls.enabled=true (and kafka.tls.ca_file)")
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		if tlsOn {
			return refused("plaintext_listener", "the broker closed the connection at once: the listener is likely plaintext (set kafka.tls.enabled=false) or requires SASL (set kafka.sasl.*)")
		}
		return refused("tls_listener", "the broker closed the connection at once: the listener likely requires TLS (set kafka.tls.enabled=true) or SASL (set kafka.sasl.*)")
	}
	// TLS to a plaintext listener: the broker reads the ClientHello as an
	// oversized request and hangs up during the handshake.
	if tlsOn && handshakeEOF(err) {
		return refused("plaintext_listener", "the broker hung up during the TLS handshake: the listener is likely plaintext (set kafka.tls.enabled=false or use the SSL/SASL_SSL port)")
	}
	return err
}

func handshakeEOF(err error) bool {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "connection reset") {
		return false
	}
	var op *net.OpError
	return strings.Contains(err.Error(), "handshake") || (errors.As(err, &op) && op.Op == "remote error")
}

// Check asks the brokers for their metadata and for topic, bounded by
// timeout: nil when they answer, a *RefusedError when they refuse
// MsgMesh (see Classify), else the error (unreachable: the caller
// retries). opts are those of Options.
func Check(ctx context.Context, opts []kgo.Opt, tlsOn bool, topic string, timeout time.Duration) error {
	cl, err := kgo.NewClient(With(opts, kgo.DialTimeout(timeout), kgo.RetryTimeout(timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		return Classify(err, tlsOn)
	}
	if t, ok := md.Topics[topic]; ok && t.Err != nil && !errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return Classify(fmt.Errorf("topic %s: %w", topic, t.Err), tlsOn)
	}
	return nil
}
