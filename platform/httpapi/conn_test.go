package httpapi

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Answers written by handlers pass through byte for byte, even a
// text/plain 400 from http.Error: only net/http's own answers change.
func TestErrorFormatListenerLeavesHandlerAnswersAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "plain from a handler", http.StatusBadRequest)
	})}
	go func() { _ = srv.Serve(ErrorFormatListener(ln, nil)) }()
	defer srv.Close()

	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || string(body) != "plain from a handler\n" {
		t.Errorf("handler answer changed: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
