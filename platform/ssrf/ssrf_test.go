package ssrf

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// resolverFunc lets a test script DNS answers.
type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

// staticResolver answers from a map; unknown names are NXDOMAIN.
func staticResolver(answers map[string][]string) resolverFunc {
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		ss, ok := answers[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]netip.Addr, 0, len(ss))
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
}

// noDNS fails the test if the guard asks DNS at all.
func noDNS(t *testing.T) resolverFunc {
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		t.Errorf("unexpected DNS lookup of %q", host)
		return nil, errors.New("unexpected lookup")
	}
}

// countingListener is a TCP listener on 127.0.0.1 that counts accepted
// connections, to prove the guard never connected.
func countingListener(t *testing.T) (port string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

// mustForbidden fails the test unless err is a *Refusal wrapping
// ErrForbidden with a reason, and returns a copy of the refusal.
func mustForbidden(t *testing.T, what string, err error) Refusal {
	t.Helper()
	var r *Refusal
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &r) {
		t.Fatalf("%s: err = %v, want a *Refusal wrapping ErrForbidden", what, err)
	}
	if r.Reason == "" {
		t.Fatalf("%s: refusal without reason", what)
	}
	return *r
}

func closeConn(c net.Conn) {
	if c != nil {
		_ = c.Close()
	}
}

func closeResp(resp *http.Response) {
	if resp != nil {
		_ = resp.Body.Close()
	}
}

var refusedURLs = []string{
	// scheme and shape
	"http://example.com/", "HTTP://example.com/", "ftp://example.com/", "wss://example.com/",
	"https:example.com", "//example.com/", "example.com", "", "https://", "https:///hook", "https://:443/",
	// userinfo and fragment tricks
	"https://evil@127.0.0.1", "https://evil@example.com/", "https://user:pass@example.com/",
	"https://example.com@127.0.0.1/", "https://good.com#@127.0.0.1", "https://example.com/#frag", "https://example.com/#",
	"https://example.com\\@127.0.0.1/",
	// non-canonical IPv4 spellings, whatever a resolver would do with them
	"https://127.1/", "https://0x7f000001/", "https://0X7F000001/", "https://2130706433/", "https://0177.0.0.1/",
	"https://0/", "https://1.2.3/", "https://127.0.0.1./", "https://0x7f.0.0.1/", "https://127.0.0.0x1/",
	"https://017700000001/", "https://0127.0.0.1/", "https://127.000.000.001/", "https://1.1.1.1./",
	"https://0x/", "https://example.0x10/", "https://foo.123/", "https://%31%32%37.0.0.1/",
	// IP literals the policy refuses
	"https://127.0.0.1/", "https://10.0.0.1:8443/x", "https://169.254.169.254/latest/meta-data/",
	"https://100.100.100.200/", "https://168.63.129.16/", "https://192.0.0.192/", "https://0.0.0.0/",
	"https://[::ffff:127.0.0.1]/", "https://[::ffff:1.1.1.1]/", "https://[::ffff:7f00:1]/",
	"https://[::1]/", "https://[::1]:443/", "https://[::]/", "https://[0:0:0:0:0:0:0:1]/",
	"https://[fe80::1%25eth0]/", "https://[fd00:ec2::254]/", "https://[64:ff9b::a9fe:a9fe]/",
	"https://[2002:7f00:1::1]/", "https://[2001:db8::1]/", "https://[1.2.3.4]/", "https://[::127.0.0.1]/",
	// names refused by name
	"https://metadata.google.internal/", "https://METADATA.GOOGLE.INTERNAL./", "https://Metadata.Google.Internal/computeMetadata/v1/",
	"https://metadata.goog/", "https://instance-data.ec2.internal/", "https://localhost/", "https://LOCALHOST./",
	"https://foo.localhost/", "https://printer.local/", "https://kafka.default.svc.cluster.local/",
	"https://kafka.default.svc/", "https://router.home.arpa/", "https://kafka/", "https://metadata/",
	// ports
	"https://example.com:/", "https://example.com:0/", "https://example.com:65536/", "https://example.com:0443/",
	"https://example.com:-1/", "https://example.com:abc/", "https://example.com:443:443/",
	// characters
	"https://café.com/", "https://exa mple.com/", " https://example.com/", "https://example.com/\x00",
	"https://example.com/a\tb", "https://-example.com/", "https://example-.com/", "https://a..com/",
	"https://example.com../", "https://ex!ample.com/",
	// length
	"https://example.com/" + strings.Repeat("a", maxURLLen),
	"https://example.com/" + strings.Repeat("é", maxURLLen/4), // short raw, long once escaped
	"https://" + strings.Repeat("a", 64) + ".com/",
}

func TestParseTargetRefuses(t *testing.T) {
	for _, raw := range refusedURLs {
		u, err := ParseTarget(raw)
		if err == nil {
			t.Errorf("ParseTarget(%q) = %s, want refusal", raw, u)
			continue
		}
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("ParseTarget(%q) = %v, want ErrForbidden", raw, err)
		}
	}
}

func TestParseTargetAccepts(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"HTTPS://Example.COM:8443/a?b=c", "https://example.com:8443/a?b=c"},
		{"https://example.com", "https://example.com"},
		{"https://example.com.", "https://example.com."},
		{"https://hooks.example.com:443/x/y", "https://hooks.example.com:443/x/y"},
		{"https://xn--caf-dma.com/", "https://xn--caf-dma.com/"},
		{"https://my_host.example.com/", "https://my_host.example.com/"},
		{"https://1.1.1.1/", "https://1.1.1.1/"},
		{"https://[2606:4700:4700:0:0:0:0:1111]:8443/", "https://[2606:4700:4700::1111]:8443/"},
		{"https://[2606:4700:4700::1111]/", "https://[2606:4700:4700::1111]/"},
		{"https://0x7f000001.example.com/", "https://0x7f000001.example.com/"}, // a DNS name; its answers are checked
		{"https://127.0.0.1.nip.io/", "https://127.0.0.1.nip.io/"},             // likewise
		{"https://example.com/?q=%23", "https://example.com/?q=%23"},           // an escaped '#' is not a fragment
		{"https://example.com:65535/", "https://example.com:65535/"},
	}
	for _, tt := range tests {
		u, err := ParseTarget(tt.raw)
		if err != nil {
			t.Errorf("ParseTarget(%q) = %v, want ok", tt.raw, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("ParseTarget(%q) = %s, want %s", tt.raw, got, tt.want)
		}
	}
}

func TestRefusalError(t *testing.T) {
	_, err := ParseTarget("https://METADATA.GOOGLE.INTERNAL./")
	r := mustForbidden(t, "metadata name", err)
	if r.Host != "metadata.google.internal." {
		t.Errorf("Host = %q, want lowercase host", r.Host)
	}
	want := `ssrf: forbidden target "metadata.google.internal.": cloud metadata host name (GCP)`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	r = mustForbidden(t, "loopback literal", CheckAddr(netip.MustParseAddr("127.0.0.1")))
	if r.Error() != "ssrf: forbidden target 127.0.0.1: loopback" {
		t.Errorf("Error() = %q", r.Error())
	}
}

func TestCheckTarget(t *testing.T) {
	g := &Guard{Resolver: staticResolver(map[string][]string{
		"public.example.com":     {"93.184.216.34", "2606:4700:4700::1111"},
		"mixed.example.com":      {"93.184.216.34", "10.0.0.1"},
		"mixed6.example.com":     {"2606:4700:4700::1111", "fd00:ec2::254"},
		"mapped.example.com":     {"::ffff:127.0.0.1"},
		"empty.example.com":      {},
		"127.0.0.1.nip.io":       {"127.0.0.1"},
		"public4in6.example.com": {"::ffff:1.1.1.1"},
	})}
	ctx := context.Background()

	for _, raw := range []string{"https://public.example.com/hook", "https://public4in6.example.com/"} {
		if err := g.CheckTarget(ctx, raw); err != nil {
			t.Errorf("CheckTarget(%s) = %v, want nil", raw, err)
		}
	}

	r := mustForbidden(t, "mixed", g.CheckTarget(ctx, "https://mixed.example.com/"))
	if r.Host != "mixed.example.com" || r.IP != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("mixed refusal = %+v, want host and private IP", r)
	}
	mustForbidden(t, "mixed6", g.CheckTarget(ctx, "https://mixed6.example.com/"))
	mustForbidden(t, "mapped", g.CheckTarget(ctx, "https://mapped.example.com/"))
	mustForbidden(t, "nip.io", g.CheckTarget(ctx, "https://127.0.0.1.nip.io/"))

	for _, raw := range []string{"https://empty.example.com/", "https://nx.example.com/"} {
		err := g.CheckTarget(ctx, raw)
		var dnsErr *net.DNSError
		if err == nil || errors.Is(err, ErrForbidden) || !errors.As(err, &dnsErr) {
			t.Errorf("CheckTarget(%s) = %v, want a DNS error that is not a refusal", raw, err)
		}
	}

	// Literals and names refused by syntax never reach DNS.
	lit := &Guard{Resolver: noDNS(t)}
	if err := lit.CheckTarget(ctx, "https://1.1.1.1/"); err != nil {
		t.Errorf("public literal: %v", err)
	}
	for _, raw := range []string{"https://127.1/", "https://0x7f000001/", "https://[::1]/", "https://metadata.google.internal/", "http://1.1.1.1/"} {
		mustForbidden(t, raw, lit.CheckTarget(ctx, raw))
	}
}

// TestEveryRefusedAddrAtRegistrationAndDial answers each refused address
// from DNS and expects both the registration check and the dialer to refuse,
// without a single connection.
func TestEveryRefusedAddrAtRegistrationAndDial(t *testing.T) {
	port, accepted := countingListener(t)
	ctx := context.Background()
	for _, s := range refusedAddrs {
		answer := netip.MustParseAddr(s)
		g := &Guard{Resolver: resolverFunc(func(context.Context, string, string) ([]netip.Addr, error) {
			return []netip.Addr{answer}, nil
		})}
		mustForbidden(t, "CheckTarget "+s, g.CheckTarget(ctx, "https://hook.example.com:"+port+"/"))
		conn, err := g.DialContext(ctx, "tcp", "hook.example.com:"+port)
		closeConn(conn)
		mustForbidden(t, "DialContext "+s, err)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}
}

// TestDialContextDNSRebinding: the name is public at registration and
// 127.0.0.1 when the dispatcher dials.
func TestDialContextDNSRebinding(t *testing.T) {
	port, accepted := countingListener(t)
	var lookups atomic.Int32
	g := &Guard{Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	})}
	ctx := context.Background()
	raw := "https://rebind.example.com:" + port + "/hook"
	if err := g.CheckTarget(ctx, raw); err != nil {
		t.Fatalf("registration: %v", err)
	}

	conn, err := g.DialContext(ctx, "tcp", "rebind.example.com:"+port)
	closeConn(conn)
	r := mustForbidden(t, "dial after rebinding", err)
	if r.IP != netip.MustParseAddr("127.0.0.1") || r.Host != "rebind.example.com" {
		t.Errorf("refusal = %+v", r)
	}

	// The same through the delivery client: the error reaches the caller.
	resp, err := g.Client(nil, 5*time.Second).Post(raw, "application/json", strings.NewReader("{}"))
	closeResp(resp)
	mustForbidden(t, "client after rebinding", err)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}
}

// TestDialerControlChecksDialledIP bypasses the resolution step and dials a
// loopback IP with the guard's net.Dialer: ControlContext alone must refuse
// it before connect.
func TestDialerControlChecksDialledIP(t *testing.T) {
	port, accepted := countingListener(t)
	g := &Guard{}
	conn, err := g.dialer().DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	closeConn(conn)
	r := mustForbidden(t, "control", err)
	if r.IP != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("refusal IP = %s", r.IP)
	}
	if err := g.control(context.Background(), "udp4", "1.1.1.1:53", nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("control(udp4) = %v, want refusal", err)
	}
	if err := g.control(context.Background(), "tcp4", "1.1.1.1:443", nil); err != nil {
		t.Errorf("control(public) = %v, want nil", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}
}

func TestDialContextRefusesWithoutDNS(t *testing.T) {
	g := &Guard{Resolver: noDNS(t)}
	ctx := context.Background()
	for _, tt := range []struct{ network, addr string }{
		{"udp", "example.com:53"}, {"unix", "/var/run/docker.sock"}, {"ip4:icmp", "1.1.1.1"},
		{"tcp", "example.com"}, {"tcp", "example.com:0"}, {"tcp", "example.com:0443"}, {"tcp", "example.com:70000"},
		{"tcp", "127.0.0.1:443"}, {"tcp4", "169.254.169.254:80"}, {"tcp", "[::1]:443"}, {"tcp", "[::ffff:127.0.0.1]:443"},
		{"tcp", "[fe80::1%eth0]:443"}, {"tcp", "127.1:443"}, {"tcp", "0x7f000001:443"}, {"tcp", "2130706433:443"},
		{"tcp", "0:443"}, {"tcp", "metadata.google.internal:80"}, {"tcp", "METADATA.GOOGLE.INTERNAL.:80"},
		{"tcp", "localhost:443"}, {"tcp", "kafka:9092"},
	} {
		conn, err := g.DialContext(ctx, tt.network, tt.addr)
		closeConn(conn)
		mustForbidden(t, tt.network+" "+tt.addr, err)
	}
}

func TestDialContextDNSFailureIsNotARefusal(t *testing.T) {
	g := &Guard{Resolver: staticResolver(map[string][]string{"empty.example.com": {}})}
	for _, addr := range []string{"nx.example.com:443", "empty.example.com:443"} {
		_, err := g.DialContext(context.Background(), "tcp", addr)
		var dnsErr *net.DNSError
		if err == nil || errors.Is(err, ErrForbidden) || !errors.As(err, &dnsErr) {
			t.Errorf("DialContext(%s) = %v, want a DNS error that is not a refusal", addr, err)
		}
	}
}

// TestTransportIgnoresProxyEnv: with every proxy variable pointing at a
// local listener, a request still goes to the guard's dialer (which asks DNS
// for the target), never to the proxy.
func TestTransportIgnoresProxyEnv(t *testing.T) {
	proxyPort, proxyHits := countingListener(t)
	proxy := "http://127.0.0.1:" + proxyPort
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	var asked atomic.Value
	g := &Guard{Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		asked.Store(host)
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	})}
	tr := g.Transport(nil)
	if tr.Proxy != nil {
		t.Fatal("Transport.Proxy is set")
	}
	if !tr.ForceAttemptHTTP2 || tr.DialContext == nil || tr.TLSHandshakeTimeout == 0 || tr.TLSClientConfig == nil {
		t.Fatalf("transport not configured: %+v", tr)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://hooks.example.com/x", strings.NewReader("{}"))
	if p, _ := http.ProxyFromEnvironment(req); p == nil || p.String() != proxy {
		t.Fatalf("test setup: environment proxy = %v, want %s", p, proxy)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	closeResp(resp)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || errors.Is(err, ErrForbidden) {
		t.Fatalf("request error = %v, want the target's DNS failure", err)
	}
	if h, _ := asked.Load().(string); h != "hooks.example.com" {
		t.Fatalf("resolver asked %q, want the target host", h)
	}
	if n := proxyHits.Load(); n != 0 {
		t.Fatalf("proxy received %d connections", n)
	}
}

func TestTransportClonesTLSConfig(t *testing.T) {
	in := &tls.Config{ServerName: "x"}
	tr := (&Guard{}).Transport(in)
	if tr.TLSClientConfig == in || tr.TLSClientConfig.ServerName != "x" {
		t.Fatal("TLS config not cloned")
	}
	if (&Guard{}).Transport(nil).TLSClientConfig.MinVersion != tls.VersionTLS12 {
		t.Fatal("default TLS config below TLS 1.2")
	}
	if c := (&Guard{}).Client(nil, 0); c.Timeout != defaultClientTimeout || c.CheckRedirect == nil {
		t.Fatalf("Client(nil, 0): timeout %s", c.Timeout)
	}
}

// TestUnsafeAllowPrivate_ClientNeverFollowsRedirect is the one test of this
// package that sets the TEST-ONLY AllowPrivate, to reach an httptest TLS
// receiver on 127.0.0.1. Every redirect status, a 308 that only adds a
// trailing slash included, comes back to the caller unfollowed.
func TestUnsafeAllowPrivate_ClientNeverFollowsRedirect(t *testing.T) {
	var hits sync.Map // path -> *atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/")); err == nil {
			http.Redirect(w, r, r.URL.Path+"/", code)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	tlsConfig := srv.Client().Transport.(*http.Transport).TLSClientConfig

	g := &Guard{AllowPrivate: true}
	client := g.Client(tlsConfig, 5*time.Second)
	for _, code := range []int{301, 302, 303, 307, 308} {
		path := "/" + strconv.Itoa(code)
		resp, err := client.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		closeResp(resp)
		if resp.StatusCode != code || resp.Header.Get("Location") != path+"/" {
			t.Errorf("POST %s: status %d location %q, want %d unfollowed", path, resp.StatusCode, resp.Header.Get("Location"), code)
		}
		if _, followed := hits.Load(path + "/"); followed {
			t.Errorf("POST %s: redirect was followed", path)
		}
	}
	// The test-only switch does not open metadata: a client with it set
	// still refuses a name answering 169.254.169.254.
	g.Resolver = staticResolver(map[string][]string{"meta.example.com": {"169.254.169.254"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	resp, err := g.Client(tlsConfig, 5*time.Second).Get("https://meta.example.com:" + port + "/")
	closeResp(resp)
	mustForbidden(t, "metadata with AllowPrivate", err)
}

// inetAtonSpelling reports whether s could be read as an IPv4 address by
// inet_aton or the WHATWG URL parser: one to four dot-separated parts, each
// decimal, octal or 0x-hex. It errs on the side of yes. Independent of the
// package's own rule, for FuzzParseTarget.
func inetAtonSpelling(s string) bool {
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) > 4 {
		// WHATWG still reads it as IPv4 when the last part is numeric.
		parts = parts[len(parts)-1:]
	}
	for _, p := range parts {
		p = strings.ToLower(p)
		if strings.HasPrefix(p, "0x") {
			p = p[2:]
			if strings.Trim(p, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// FuzzParseTarget asserts that anything ParseTarget accepts is https, has
// no userinfo or fragment, and has a host that is either a public IP literal
// in canonical form or a DNS name that is not an IP address in any spelling.
func FuzzParseTarget(f *testing.F) {
	for _, s := range refusedURLs {
		f.Add(s)
	}
	for _, s := range []string{"https://example.com/hook", "https://1.1.1.1/", "https://[2606:4700:4700::1111]:8443/",
		"https://example.com.", "https://a.b.c.d.e/", "https://0x7f000001.example.com/", "https://1.2.3.4.5/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseTarget(raw)
		if err != nil {
			if !errors.Is(err, ErrForbidden) {
				t.Fatalf("ParseTarget(%q) error %v does not wrap ErrForbidden", raw, err)
			}
			return
		}
		if u.Scheme != "https" || u.User != nil || u.Opaque != "" || u.Fragment != "" || strings.Contains(raw, "#") {
			t.Fatalf("ParseTarget(%q) accepted %s", raw, u)
		}
		host := u.Hostname()
		if host == "" || host != strings.ToLower(host) {
			t.Fatalf("ParseTarget(%q): host %q", raw, host)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Zone() != "" || ip.Is4In6() || ip.String() != host || CheckAddr(ip) != nil {
				t.Fatalf("ParseTarget(%q) accepted IP literal %q", raw, host)
			}
			if ip.Is6() != strings.HasPrefix(u.Host, "[") {
				t.Fatalf("ParseTarget(%q): literal %q badly bracketed", raw, u.Host)
			}
		} else {
			name := strings.TrimSuffix(host, ".")
			if net.ParseIP(name) != nil || inetAtonSpelling(name) || strings.ContainsAny(host, "[]:%") {
				t.Fatalf("ParseTarget(%q) accepted IP spelling %q", raw, host)
			}
			if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" || !strings.Contains(name, ".") {
				t.Fatalf("ParseTarget(%q) accepted host %q", raw, host)
			}
			if name == "metadata.google.internal" || name == "localhost" || strings.HasSuffix(name, ".internal") {
				t.Fatalf("ParseTarget(%q) accepted internal name %q", raw, host)
			}
		}
		// Normalising is stable: the stored form parses to itself.
		again, err := ParseTarget(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("ParseTarget(%q) = %s, which re-parses to %v, %v", raw, u, again, err)
		}
		if _, err := url.Parse(u.String()); err != nil {
			t.Fatalf("ParseTarget(%q) = %s, unparsable: %v", raw, u, err)
		}
	})
}
