package ssrf

import (
	"errors"
	"net/netip"
	"testing"
)

// refusedAddrs is every address form the policy must refuse (issue 5 item 5,
// notes "Ranges to refuse"). The same table drives CheckAddr, CheckTarget
// (a resolver answering it at registration) and DialContext (at dial).
var refusedAddrs = []string{
	// loopback, unspecified, this network
	"127.0.0.1", "127.255.255.254", "127.1.2.3",
	"0.0.0.0", "0.1.2.3", "0.255.255.255",
	"::1", "::",
	// private (RFC 1918)
	"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1", "192.168.255.255",
	// shared 100.64/10 and Alibaba metadata
	"100.64.0.1", "100.127.255.255", "100.100.100.200",
	// link-local and cloud metadata
	"169.254.0.1", "169.254.169.254", "169.254.170.2", "169.254.0.23",
	"fe80::1", "febf:ffff::1", "fd00:ec2::254",
	"168.63.129.16", // Azure WireServer, public space
	"192.0.0.192",   // Oracle metadata
	"192.0.0.1", "192.0.0.255",
	// ULA, site-local
	"fc00::1", "fd00::1", "fdff:ffff::1", "fd20:ce::254", "fec0::1", "feff::1",
	// benchmarking and documentation
	"198.18.0.1", "198.19.255.255", "192.0.2.1", "198.51.100.1", "203.0.113.1",
	"2001:db8::1", "2001:db8:ffff::1", "3fff::1", "3fff:fff:ffff::1", "2001:2::1",
	// multicast, reserved, broadcast, 6to4 relay
	"224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", "ff05::1:3",
	"240.0.0.1", "250.1.2.3", "255.255.255.254", "255.255.255.255", "192.88.99.1",
	// IPv4 hidden in IPv6: mapped (judged by the IPv4), compatible, translated
	"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::ffff:100.100.100.200",
	"::127.0.0.1", "::10.0.0.1", "::1.1.1.1", "::ffff:0:7f00:1", "::ffff:0:101:101",
	// NAT64, 6to4, Teredo: refused even when the IPv4 inside is public
	"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::101:101", "64:ff9b:1::1", "64:ff9b:1:ffff::1",
	"2002:7f00:1::1", "2002:a9fe:a9fe::1", "2002:101:101::1",
	"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1",
	// other IPv6 special purpose
	"100::1", "100::ffff:ffff:ffff:ffff", "2001:10::1", "2001:1f::1", "2001:20::1", "2001:2f::1",
	"2001:4:112::1", "2001:1ff::1", "5f00::1",
	// outside 2000::/3
	"4000::1", "1000::1", "::2", "e000::1",
	// zoned
	"fe80::1%eth0", "2606:4700:4700::1111%eth0",
}

var publicAddrs = []string{
	"1.1.1.1", "8.8.8.8", "93.184.216.34", "9.9.9.9",
	"100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0",
	"198.17.255.255", "198.20.0.0", "223.255.255.255", "168.63.129.15", "192.0.1.1", "192.31.196.1",
	"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1", "2001:200::1",
	"::ffff:1.1.1.1", // mapped: what a dial reaches is 1.1.1.1
}

func TestCheckAddrRefuses(t *testing.T) {
	for _, s := range refusedAddrs {
		ip := netip.MustParseAddr(s)
		err := CheckAddr(ip)
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("CheckAddr(%s) = %v, want ErrForbidden", s, err)
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Reason == "" || r.IP != ip {
			t.Errorf("CheckAddr(%s): refusal %+v, want reason and IP", s, r)
		}
	}
}

func TestCheckAddrInvalid(t *testing.T) {
	if err := CheckAddr(netip.Addr{}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("CheckAddr(zero Addr) = %v, want ErrForbidden", err)
	}
}

func TestCheckAddrAcceptsPublic(t *testing.T) {
	for _, s := range publicAddrs {
		if err := CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want nil", s, err)
		}
	}
}

func TestCheckAddrReasons(t *testing.T) {
	tests := []struct{ addr, reason string }{
		{"169.254.169.254", "cloud metadata endpoint (AWS, GCP, Azure, DigitalOcean, ...)"},
		{"100.100.100.200", "cloud metadata endpoint (Alibaba)"},
		{"192.0.0.192", "cloud metadata endpoint (Oracle)"},
		{"168.63.129.16", "cloud platform endpoint (Azure WireServer)"},
		{"fd00:ec2::254", "cloud metadata endpoint (AWS IPv6)"},
		{"::ffff:127.0.0.1", "IPv4-mapped IPv6 of loopback"},
		{"64:ff9b::101:101", "NAT64 well-known prefix (IPv4 inside IPv6)"},
		{"4000::1", "not IPv6 global unicast (outside 2000::/3)"},
	}
	for _, tt := range tests {
		var r *Refusal
		if err := CheckAddr(netip.MustParseAddr(tt.addr)); !errors.As(err, &r) || r.Reason != tt.reason {
			t.Errorf("CheckAddr(%s) = %v, want reason %q", tt.addr, err, tt.reason)
		}
	}
}

// TestAllowPrivateIsNarrow checks that the test-only switch lets through
// loopback and private space only; metadata and the rest stay refused.
func TestAllowPrivateIsNarrow(t *testing.T) {
	g := &Guard{AllowPrivate: true}
	for _, s := range []string{"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "fd12::1", "::ffff:127.0.0.1"} {
		if err := g.checkAddr("", netip.MustParseAddr(s)); err != nil {
			t.Errorf("AllowPrivate: checkAddr(%s) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16", "192.0.0.192",
		"0.0.0.0", "::", "fe80::1", "64:ff9b::7f00:1", "2002:7f00:1::1", "224.0.0.1", "255.255.255.255"} {
		if err := g.checkAddr("", netip.MustParseAddr(s)); !errors.Is(err, ErrForbidden) {
			t.Errorf("AllowPrivate: checkAddr(%s) = %v, want ErrForbidden", s, err)
		}
	}
	if err := (&Guard{}).checkAddr("", netip.MustParseAddr("127.0.0.1")); !errors.Is(err, ErrForbidden) {
		t.Errorf("default Guard let loopback through: %v", err)
	}
}

// FuzzCheckAddr asserts that whatever CheckAddr accepts is public unicast by
// the standard library's own predicates and outside the ranges that carry
// IPv4 or are reserved.
func FuzzCheckAddr(f *testing.F) {
	for _, s := range append(append([]string{}, refusedAddrs...), publicAddrs...) {
		ip := netip.MustParseAddr(s).WithZone("")
		f.Add(ip.AsSlice())
	}
	mustNot := []netip.Prefix{
		netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("240.0.0.0/4"),
		netip.MustParsePrefix("168.63.129.16/32"), netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"),
		netip.MustParsePrefix("2002::/16"), netip.MustParsePrefix("2001::/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("3fff::/20"),
		netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fec0::/10"),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok || CheckAddr(ip) != nil {
			return
		}
		u := ip.Unmap()
		if !u.IsGlobalUnicast() || u.IsPrivate() || u.IsLoopback() || u.IsLinkLocalUnicast() ||
			u.IsMulticast() || u.IsUnspecified() {
			t.Fatalf("CheckAddr accepted non-public %s", ip)
		}
		if u.Is6() && !netip.MustParsePrefix("2000::/3").Contains(u) {
			t.Fatalf("CheckAddr accepted %s outside 2000::/3", ip)
		}
		for _, p := range mustNot {
			if p.Contains(u) {
				t.Fatalf("CheckAddr accepted %s in %s", ip, p)
			}
		}
	})
}
