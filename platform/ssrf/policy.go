package ssrf

import "net/netip"

// rule refuses every address in prefix for reason. A rule marked private
// covers loopback or private space that Guard.AllowPrivate (test-only) lets
// through; every other rule holds whatever the Guard says.
type rule struct {
	prefix  netip.Prefix
	reason  string
	private bool
}

func refuse(prefix, reason string) rule {
	return rule{prefix: netip.MustParsePrefix(prefix), reason: reason}
}

func refusePrivate(prefix, reason string) rule {
	return rule{prefix: netip.MustParsePrefix(prefix), reason: reason, private: true}
}

// policy is the table CheckAddr walks top to bottom; the first matching rule
// gives the reason, so narrow, named entries (cloud metadata) come before the
// block that holds them. Sources: RFC 6890 and the IANA IPv4 and IPv6
// special-purpose address registries, plus the cloud metadata endpoints
// (docs/notes "Ranges to refuse"). It is never modified after init.
//
// IPv4-mapped IPv6 (::ffff:0:0/96) is not in the table: CheckAddr unmaps it
// first and judges the embedded IPv4 address, which is what a dial reaches.
// After the table, an IPv6 address outside 2000::/3 (global unicast) is
// refused as well, so only genuinely public unicast addresses pass.
var policy = []rule{
	// IPv4: named single addresses first.
	refuse("0.0.0.0/32", "unspecified address"),
	refuse("255.255.255.255/32", "limited broadcast"),
	refuse("169.254.169.254/32", "cloud metadata endpoint (AWS, GCP, Azure, DigitalOcean, ...)"),
	refuse("100.100.100.200/32", "cloud metadata endpoint (Alibaba)"),
	refuse("192.0.0.192/32", "cloud metadata endpoint (Oracle)"),
	refuse("168.63.129.16/32", "cloud platform endpoint (Azure WireServer)"),
	// IPv4 blocks.
	refuse("0.0.0.0/8", "\"this network\" (0/8)"),
	refusePrivate("10.0.0.0/8", "private (RFC 1918)"),
	refuse("100.64.0.0/10", "shared address space (RFC 6598, carrier-grade NAT)"),
	refusePrivate("127.0.0.0/8", "loopback"),
	refuse("169.254.0.0/16", "link-local"),
	refusePrivate("172.16.0.0/12", "private (RFC 1918)"),
	refuse("192.0.0.0/24", "IETF protocol assignments (192.0.0/24)"),
	refuse("192.0.2.0/24", "documentation (TEST-NET-1)"),
	refuse("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
	refusePrivate("192.168.0.0/16", "private (RFC 1918)"),
	refuse("198.18.0.0/15", "benchmarking (RFC 2544)"),
	refuse("198.51.100.0/24", "documentation (TEST-NET-2)"),
	refuse("203.0.113.0/24", "documentation (TEST-NET-3)"),
	refuse("224.0.0.0/4", "multicast"),
	refuse("240.0.0.0/4", "reserved (240/4)"),

	// IPv6: named single addresses first.
	refuse("::/128", "unspecified address"),
	refusePrivate("::1/128", "loopback"),
	refuse("fd00:ec2::254/128", "cloud metadata endpoint (AWS IPv6)"),
	// IPv6 blocks that carry or reach IPv4.
	refuse("::ffff:0:0:0/96", "IPv4-translated IPv6 (SIIT)"),
	refuse("::/96", "IPv4-compatible IPv6 (deprecated)"),
	refuse("64:ff9b::/96", "NAT64 well-known prefix (IPv4 inside IPv6)"),
	refuse("64:ff9b:1::/48", "NAT64 local-use prefix (IPv4 inside IPv6)"),
	refuse("2002::/16", "6to4 (IPv4 inside IPv6)"),
	refuse("2001::/32", "Teredo (IPv4 inside IPv6)"),
	// Other IPv6 special-purpose blocks.
	refuse("100::/64", "discard-only (RFC 6666)"),
	refuse("2001:2::/48", "benchmarking (RFC 5180)"),
	refuse("2001:10::/28", "ORCHID (deprecated)"),
	refuse("2001:20::/28", "ORCHIDv2"),
	refuse("2001:db8::/32", "documentation (2001:db8::/32)"),
	refuse("2001::/23", "IETF protocol assignments (2001::/23)"),
	refuse("3fff::/20", "documentation (3fff::/20)"),
	refuse("5f00::/16", "SRv6 SIDs (RFC 9602)"),
	refusePrivate("fc00::/7", "unique local (ULA, fc00::/7)"),
	refuse("fec0::/10", "site-local (deprecated)"),
	refuse("fe80::/10", "link-local"),
	refuse("ff00::/8", "multicast"),
}

// globalUnicast6 is the only IPv6 space that may pass (RFC 4291 2.4).
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// judge returns the rule that refuses ip, if any. ok is false when ip passes.
func judge(ip netip.Addr) (r rule, ok bool) {
	switch {
	case !ip.IsValid():
		return rule{reason: "invalid address"}, true
	case ip.Zone() != "":
		return rule{reason: "scoped IPv6 address (zone " + ip.Zone() + ")"}, true
	}
	addr := ip
	mapped := addr.Is4In6()
	if mapped {
		addr = addr.Unmap()
	}
	for _, r := range policy {
		if r.prefix.Contains(addr) {
			if mapped {
				r.reason = "IPv4-mapped IPv6 of " + r.reason
			}
			return r, true
		}
	}
	if addr.Is6() && !globalUnicast6.Contains(addr) {
		return rule{reason: "not IPv6 global unicast (outside 2000::/3)"}, true
	}
	return rule{}, false
}

// CheckAddr applies the policy table to one IP: it returns nil for a public
// unicast address and a *Refusal (wrapping ErrForbidden) otherwise.
// IPv4-mapped IPv6 addresses are judged by the IPv4 address they carry;
// zoned (scoped) and invalid addresses are refused. CheckAddr knows nothing
// of Guard.AllowPrivate: it is the production policy.
func CheckAddr(ip netip.Addr) error {
	if r, refused := judge(ip); refused {
		return &Refusal{IP: ip, Reason: r.reason}
	}
	return nil
}

// checkAddr is CheckAddr with the test-only AllowPrivate exception applied.
func (g *Guard) checkAddr(host string, ip netip.Addr) error {
	r, refused := judge(ip)
	if !refused || (r.private && g.AllowPrivate) {
		return nil
	}
	return &Refusal{Host: host, IP: ip, Reason: r.reason}
}
