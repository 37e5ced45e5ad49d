// Package ssrf keeps webhook traffic away from MsgMesh's own network: the
// server-side request forgery guard of spec section 2 ("Webhook SSRF
// protection") and issue 5 item 5.
//
// A webhook target is checked twice. At registration, CheckTarget parses the
// URL (ParseTarget), resolves the host and refuses it unless every address
// is public unicast (CheckAddr). At delivery, every new connection goes
// through Guard.DialContext, which resolves again, checks every answer, dials
// a checked IP and checks once more, inside net.Dialer.ControlContext, the IP
// the socket is actually connecting to; a name that turns private after
// registration (DNS rebinding) is refused there. Guard.Client never follows a
// redirect and ignores proxy settings from the environment.
//
// Only the test-only Guard.AllowPrivate relaxes anything, and only for
// loopback and private ranges; nothing else can be switched off.
//
// Every refusal is a *Refusal wrapping ErrForbidden. Other errors (DNS
// failures, connection refused, timeouts) are not refusals: the dispatcher
// treats them as temporary, while a refusal disables the webhook.
package ssrf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrForbidden is wrapped by every refusal; errors.As(err, **Refusal) gives
// the host, address and reason.
var ErrForbidden = errors.New("ssrf: forbidden target")

// Refusal says why the guard refused a target. Host is the URL host or dial
// host when known, IP the refused address when one was involved (the zero
// Addr otherwise), Reason a short lowercase phrase meant for the 422 body and
// the webhook's disabled-reason.
type Refusal struct {
	Host   string
	IP     netip.Addr
	Reason string
}

// Error formats the refusal as `ssrf: forbidden target "host" (ip): reason`,
// leaving out what is unknown.
func (r *Refusal) Error() string {
	var b strings.Builder
	b.WriteString(ErrForbidden.Error())
	if r.Host != "" {
		fmt.Fprintf(&b, " %q", r.Host)
	}
	if r.IP.IsValid() {
		if r.Host != "" {
			b.WriteString(" (" + r.IP.String() + ")")
		} else {
			b.WriteString(" " + r.IP.String())
		}
	}
	b.WriteString(": " + r.Reason)
	return b.String()
}

// Unwrap returns ErrForbidden.
func (r *Refusal) Unwrap() error { return ErrForbidden }

// Resolver looks up a host's addresses; network is "ip", "ip4" or "ip6".
// *net.Resolver satisfies it. Tests pass their own to script DNS answers.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks webhook targets and dials them. The zero value is ready to use
// with the production policy. A Guard is safe for concurrent use; do not
// change its fields once it is in use.
type Guard struct {
	// Resolver answers DNS questions; nil means net.DefaultResolver.
	Resolver Resolver

	// AllowPrivate is TEST-ONLY (config
	// MSGMESH_WEBHOOKS_UNSAFE_ALLOW_PRIVATE_TARGETS): loopback (127/8, ::1),
	// RFC 1918 and ULA (fc00::/7) targets are let through so integration
	// tests can reach a local HTTPS receiver. Cloud metadata, link-local,
	// shared, reserved, documentation, multicast and IPv4-in-IPv6 ranges, and
	// every URL and host-name rule, stay refused even then. Production must
	// never set it; the guard's own tests run with it off.
	AllowPrivate bool

	// DialTimeout bounds one TCP connect; 0 means 10 s.
	DialTimeout time.Duration
}

const (
	defaultDialTimeout   = 10 * time.Second
	defaultClientTimeout = 10 * time.Second
	maxURLLen            = 4096
	maxNameLen           = 253
	maxLabelLen          = 63
)

func (g *Guard) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

func (g *Guard) dialTimeout() time.Duration {
	if g.DialTimeout > 0 {
		return g.DialTimeout
	}
	return defaultDialTimeout
}

// target is a syntactically valid webhook URL and its host, before any
// address policy is applied.
type target struct {
	url  *url.URL
	host string     // lowercase; no brackets for IPv6
	ip   netip.Addr // valid when the host is an IP literal
}

// ParseTarget checks the syntax of a webhook URL and returns it normalised
// (lowercase host, canonical IPv6 literal); store and use the returned
// URL's String(), not raw. It refuses, with a *Refusal:
//   - a scheme other than https, an opaque URL, a missing host;
//   - userinfo (https://evil@127.0.0.1) and any fragment (https://good.com#@127.0.0.1);
//   - an empty, zero, out-of-range or zero-padded port;
//   - control characters, spaces, backslashes, non-ASCII hosts (use punycode);
//   - IPv4 in any non-canonical spelling (127.1, 0x7f000001, 2130706433,
//     0177.0.0.1, 0, 1.2.3, 127.0.0.1.): any host whose last label is a
//     number, as the WHATWG URL parser and glibc's inet_aton read it,
//     whatever the resolver would answer;
//   - IPv6 literals that are zoned, IPv4-mapped or refused by CheckAddr, and
//     canonical IPv4 literals refused by CheckAddr;
//   - single-label names and names reserved for internal use or known as
//     cloud metadata hosts (metadata.google.internal, *.internal, *.local,
//     *.localhost, ...), case-insensitively and with or without trailing dot.
//
// ParseTarget does not resolve DNS names; CheckTarget does.
func ParseTarget(raw string) (*url.URL, error) {
	t, err := parseTarget(raw)
	if err != nil {
		return nil, err
	}
	if r, refused := judge(t.ip); t.ip.IsValid() && refused {
		return nil, &Refusal{Host: t.host, IP: t.ip, Reason: r.reason}
	}
	return t.url, nil
}

func parseTarget(raw string) (target, error) {
	bad := func(host, reason string) (target, error) {
		return target{}, &Refusal{Host: host, Reason: reason}
	}
	if len(raw) > maxURLLen {
		return bad("", fmt.Sprintf("url longer than %d bytes", maxURLLen))
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c <= ' ' || c == 0x7f:
			return bad("", "url contains a space or control character")
		case c == '\\':
			return bad("", "url contains a backslash")
		case c == '#':
			return bad("", "url has a fragment")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("", "malformed url")
	}
	switch {
	case u.Scheme != "https":
		return bad("", "scheme must be https")
	case u.Opaque != "":
		return bad("", "url must be https://host/...")
	case u.User != nil:
		return bad(u.Hostname(), "url has userinfo")
	case u.Host == "" || u.Hostname() == "":
		return bad("", "url has no host")
	case strings.HasSuffix(u.Host, ":"):
		return bad(u.Hostname(), "url has an empty port")
	}
	port := u.Port()
	if port != "" {
		if _, ok := parsePort(port); !ok {
			return bad(u.Hostname(), "port must be 1-65535 in plain decimal")
		}
	}
	host := strings.ToLower(u.Hostname())
	ip, err := checkHost(host, strings.HasPrefix(u.Host, "["))
	if err != nil {
		return target{}, err
	}
	canon := host
	if ip.Is6() {
		canon = "[" + ip.String() + "]"
	}
	if port != "" {
		canon += ":" + port
	}
	u.Host = canon
	if len(u.String()) > maxURLLen {
		return bad(host, fmt.Sprintf("url longer than %d bytes once escaped", maxURLLen))
	}
	return target{url: u, host: host, ip: ip}, nil
}

// parsePort reads a port in plain decimal (no sign, no leading zero) in
// [1, 65535].
func parsePort(s string) (uint16, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' || len(s) > 5 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint16(n), true
}

// checkHost applies the host rules that need no DNS. host is lowercase and
// without brackets; bracketed says it was written as an IPv6 literal. It
// returns the address of an IP literal, or the zero Addr for a DNS name. It
// does not apply the address policy.
func checkHost(host string, bracketed bool) (netip.Addr, error) {
	if bracketed {
		ip, err := netip.ParseAddr(host)
		switch {
		case err != nil || !ip.Is6():
			return netip.Addr{}, &Refusal{Host: host, Reason: "malformed IPv6 literal"}
		case ip.Zone() != "":
			return netip.Addr{}, &Refusal{Host: host, Reason: "scoped IPv6 literal (zone)"}
		case ip.Is4In6():
			return netip.Addr{}, &Refusal{Host: host, IP: ip, Reason: "IPv4-mapped IPv6 literal (write the IPv4 address)"}
		}
		return ip, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		return ip, nil // canonical dotted decimal: netip refuses every other spelling
	}
	if reason := checkName(host); reason != "" {
		return netip.Addr{}, &Refusal{Host: host, Reason: reason}
	}
	return netip.Addr{}, nil
}

// blockedNames are refused exactly; blockedSuffixes with any label in front.
var (
	blockedNames = map[string]string{
		"metadata.google.internal": "cloud metadata host name (GCP)",
		"metadata.goog":            "cloud metadata host name (GCP)",
		"metadata.tencentyun.com":  "cloud metadata host name (Tencent)",
	}
	blockedSuffixes = []string{"localhost", "local", "localdomain", "internal", "home.arpa", "svc", "invalid"}
)

// checkName returns why a lowercase DNS name is refused, or "".
func checkName(host string) string {
	name := strings.TrimSuffix(host, ".")
	if name == "" {
		return "url has no host"
	}
	if len(name) > maxNameLen {
		return "host name longer than 253 bytes"
	}
	labels := strings.Split(name, ".")
	if numericLabel(labels[len(labels)-1]) {
		return "IPv4 address in a non-canonical spelling (write it as dotted decimal a.b.c.d)"
	}
	for _, l := range labels {
		if l == "" || len(l) > maxLabelLen {
			return "host name has an empty or over-long label"
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "host name label starts or ends with '-'"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !nameByte(c) {
				if c >= 0x80 {
					return "host name must be ASCII (use the punycode xn-- form)"
				}
				return "host name has a character outside a-z 0-9 - _"
			}
		}
	}
	if reason, ok := blockedNames[name]; ok {
		return reason
	}
	for _, s := range blockedSuffixes {
		if name == s || strings.HasSuffix(name, "."+s) {
			return "host name reserved for local or internal use (." + s + ")"
		}
	}
	if len(labels) < 2 {
		return "single-label host name (resolves through internal search domains)"
	}
	return ""
}

// numericLabel reports whether a lowercase label is a number as the WHATWG
// URL parser ("ends in a number") and inet_aton read it: decimal or octal
// digits, or 0x followed by hex digits (possibly none).
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	digits, isHex := l, false
	if strings.HasPrefix(l, "0x") {
		digits, isHex = l[2:], true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !isDigit(c) && (!isHex || c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// nameByte reports whether c may appear in a host name label.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || isDigit(c) || c == '-' || c == '_'
}

// CheckTarget is the registration check: ParseTarget, then resolve the host
// and require at least one address and that every address passes the
// policy. A refusal is a *Refusal; a DNS failure or an empty answer is
// returned as a non-refusal error (a *net.DNSError for the empty answer),
// which a handler should still report as 422 with the message.
func (g *Guard) CheckTarget(ctx context.Context, raw string) error {
	t, err := parseTarget(raw)
	if err != nil {
		return err
	}
	if t.ip.IsValid() {
		return g.checkAddr(t.host, t.ip)
	}
	_, err = g.resolve(ctx, "ip", t.host)
	return err
}

// resolve looks host up and checks every answer; any refused answer refuses
// the host. The answers are returned unmapped.
func (g *Guard) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := g.resolver().LookupNetIP(ctx, network, host)
	if err != nil {
		return nil, fmt.Errorf("ssrf: resolve %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := g.checkAddr(host, a); err != nil {
			return nil, err
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// DialContext is the delivery dialer, for http.Transport.DialContext. addr
// is "host:port" and network "tcp", "tcp4" or "tcp6" (anything else is
// refused). It applies ParseTarget's host rules, resolves the host, refuses
// it if any answer fails the policy, and dials the checked IPs in turn; the
// net.Dialer's ControlContext checks again the IP the socket actually
// connects to, so nothing unchecked is ever dialled. A refusal is a *Refusal;
// DNS and connect failures are returned as they are (temporary for the
// dispatcher), joined when several addresses were tried.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var lookupNet string
	switch network {
	case "tcp":
		lookupNet = "ip"
	case "tcp4":
		lookupNet = "ip4"
	case "tcp6":
		lookupNet = "ip6"
	default:
		return nil, &Refusal{Host: addr, Reason: "network " + strconv.Quote(network) + " is not tcp"}
	}
	hostPart, portPart, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &Refusal{Host: addr, Reason: "malformed dial address"}
	}
	port, ok := parsePort(portPart)
	if !ok {
		return nil, &Refusal{Host: hostPart, Reason: "port must be 1-65535 in plain decimal"}
	}
	host := strings.ToLower(hostPart)
	ip, err := checkHost(host, strings.Contains(host, ":"))
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip.IsValid() {
		if err := g.checkAddr(host, ip); err != nil {
			return nil, err
		}
		ips = []netip.Addr{ip}
	} else if ips, err = g.resolve(ctx, lookupNet, host); err != nil {
		return nil, err
	}
	d := g.dialer()
	var errs []error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip, port).String())
		if err == nil {
			return conn, nil
		}
		var ref *Refusal
		if errors.As(err, &ref) {
			ref.Host = host
			return nil, ref
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

// dialer returns the net.Dialer whose ControlContext re-checks every
// address right before connect(2).
func (g *Guard) dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:        g.dialTimeout(),
		KeepAlive:      30 * time.Second,
		ControlContext: g.control,
	}
}

// control runs after socket(2) and before connect(2) with the literal
// address being dialled.
func (g *Guard) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return &Refusal{Host: address, Reason: "network " + strconv.Quote(network) + " is not tcp"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Refusal{Host: address, Reason: "dial address is not an IP"}
	}
	return g.checkAddr("", ap.Addr())
}

// Transport returns an http.Transport for webhook delivery: every
// connection goes through g.DialContext, Proxy is nil (HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY are ignored), HTTP/2 is attempted, the TLS
// handshake is bounded by 10 s and response headers by 64 KiB. tlsConfig is
// cloned; nil means the system roots with TLS 1.2 at least. The transport
// sets no per-request deadline: bound each request (Client does).
func (g *Guard) Transport(tlsConfig *tls.Config) *http.Transport {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if tlsConfig != nil {
		tc = tlsConfig.Clone()
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    10 * time.Second,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Client returns an http.Client over g.Transport(tlsConfig) that never
// follows a redirect: CheckRedirect returns http.ErrUseLastResponse, so the
// caller sees the 3xx itself (a temporary failure for the dispatcher, even a
// 308 that only adds a trailing slash). timeout bounds each request from
// dial to the end of the body; 0 means 10 s. No cookie jar.
func (g *Guard) Client(tlsConfig *tls.Config, timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = defaultClientTimeout
	}
	return &http.Client{
		Transport: g.Transport(tlsConfig),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
