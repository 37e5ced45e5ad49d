package webhookstore

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
)

func TestRedactError(t *testing.T) {
	secretURL := "https://hooks.example.com/in?token=s3cr3t&x=1#frag"
	ue := &url.Error{Op: "Post", URL: secretURL, Err: errors.New("dial tcp 203.0.113.7:443: connect: connection refused")}
	if got := RedactError(ue); strings.Contains(got, "s3cr3t") || strings.Contains(got, "hooks.example.com/in") || !strings.Contains(got, "connection refused") {
		t.Errorf("url.Error: %q", got)
	}
	dns := &url.Error{Op: "Post", URL: secretURL, Err: &net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: "10.0.0.2:53", IsNotFound: true}}
	if got := RedactError(dns); strings.Contains(got, "10.0.0.2") || !strings.Contains(got, "no such host") {
		t.Errorf("DNS error: %q", got)
	}
	if got := RedactError(errors.New("bad target " + secretURL + ": refused")); strings.Contains(got, "s3cr3t") || !strings.Contains(got, "https://hooks.example.com/in: refused") {
		t.Errorf("embedded URL: %q", got)
	}
	if got := RedactError(errors.New(strings.Repeat("é", 400))); len(got) > maxErrorText+len("…") {
		t.Errorf("not capped: %d bytes", len(got))
	}
	if RedactError(nil) != "" {
		t.Error("nil error")
	}
}
