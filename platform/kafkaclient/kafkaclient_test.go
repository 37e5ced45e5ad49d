package kafkaclient

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgmesh/msgmesh/platform/config"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err    error
		tlsOn  bool
		reason string // "" = not refused
	}{
		{fmt.Errorf("sasl: %w", kerr.SaslAuthenticationFailed), true, "authentication"},
		{kerr.IllegalSaslState, false, "authentication"},
		{fmt.Errorf("topic x: %w", kerr.TopicAuthorizationFailed), true, "authorization"},
		{kerr.ClusterAuthorizationFailed, true, "authorization"},
		{fmt.Errorf("unable to dial: %w", x509.UnknownAuthorityError{}), true, "tls"},
		{fmt.Errorf("unable to dial: %w", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}), true, "tls"},
		{errors.New("invalid large response size 352518912 > limit; is this a plaintext connection speaking to a tls endpoint?"), false, "tls_listener"},
		{fmt.Errorf("tls handshake: %w", io.EOF), true, "plaintext_listener"},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true, ""},
		{kerr.NotLeaderForPartition, true, ""},
	} {
		err := Classify(tc.err, tc.tlsOn)
		var r *RefusedError
		if got := errors.As(err, &r); got != (tc.reason != "") || (got && r.Reason != tc.reason) {
			t.Errorf("Classify(%v) = %v, want reason %q", tc.err, err, tc.reason)
		}
	}
	if Classify(nil, true) != nil {
		t.Fatal("Classify(nil) != nil")
	}
}

func TestOptionsFiles(t *testing.T) {
	k := config.Defaults().Kafka
	k.TLS = config.KafkaTLS{Enabled: true, CAFile: "/nonexistent/ca.pem"}
	if _, err := Options(k, []string{"127.0.0.1:9092"}); err == nil || !strings.Contains(err.Error(), "kafka.tls.ca_file") {
		t.Fatalf("missing CA file: %v", err)
	}
	k.TLS = config.KafkaTLS{Enabled: true, CAFile: "/etc/hostname"}
	if _, err := Options(k, []string{"127.0.0.1:9092"}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("non-PEM CA file: %v", err)
	}
	k.TLS = config.KafkaTLS{}
	k.SASL = config.KafkaSASL{Mechanism: config.SASLScramSHA512, Username: "u", Password: "p"}
	opts, err := Options(k, []string{"127.0.0.1:9092"})
	if err != nil || len(opts) != 4 {
		t.Fatalf("SCRAM options: %d %v", len(opts), err)
	}
}
