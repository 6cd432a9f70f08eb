package egress

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// addrClass is why an address is special to the guarded dialer; "" means an
// ordinary address.
type addrClass string

const (
	classLoopback    addrClass = "loopback"
	classUnspecified addrClass = "unspecified"
	classLinkLocal   addrClass = "link-local"
	classMulticast   addrClass = "multicast"
	classBroadcast   addrClass = "broadcast"
	classReserved    addrClass = "reserved"
	classMetadata    addrClass = "cloud metadata"
	classHostService addrClass = "host-local service"
	classPrivate     addrClass = "private"
)

// metadataAddrs are cloud instance-metadata endpoints, named apart from
// their range so the audit says what was really asked for.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, ...
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	// The IPv6 ones sit in ULA space, which classify would otherwise
	// judge private (allowed unless deny_private).
	netip.MustParseAddr("fd00:ec2::254"),      // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),       // AWS EKS Pod Identity Agent (credentials)
	netip.MustParseAddr("fd20:ce::254"),       // GCP metadata over IPv6
	netip.MustParseAddr("fd00:42::42"),        // Scaleway metadata over IPv6
	netip.MustParseAddr("fd00:c1::a9fe:a9fe"), // Oracle Cloud IMDS over IPv6
	netip.MustParseAddr("fd00:a9fe:a9fe::1"),  // Akamai (Linode) metadata over IPv6
}

// hostServiceAddrs are served by a daemon on this host, though they lie
// in ranges judged private: Tailscale's 100.100.100.100 (and its IPv6
// form) answers MagicDNS and serves Taildrive's shares of the user's
// files over WebDAV.
var hostServiceAddrs = []netip.Addr{
	netip.MustParseAddr("100.100.100.100"),
	netip.MustParseAddr("fd7a:115c:a1e0::53"),
}

var (
	thisNetwork   = netip.MustParsePrefix("0.0.0.0/8")
	reserved4     = netip.MustParsePrefix("240.0.0.0/4")
	broadcast4    = netip.MustParseAddr("255.255.255.255")
	cgnat         = netip.MustParsePrefix("100.64.0.0/10")
	ipv4Compat    = netip.MustParsePrefix("::/96")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	teredo        = netip.MustParsePrefix("2001::/32")
	discardPrefix = netip.MustParsePrefix("100::/64")
)

// classify says whether an address must not be dialled unless it is itself
// on the allowlist. IPv6 forms that embed an IPv4 address (4in6, IPv4-
// compatible, NAT64, 6to4, Teredo) are judged by the address they embed.
// Private ranges come back as classPrivate; the caller decides on those.
func classify(a netip.Addr) addrClass {
	a = a.Unmap()
	if a.Is4() {
		return classify4(a)
	}
	switch {
	case a.IsLoopback():
		return classLoopback
	case a.IsUnspecified():
		return classUnspecified
	case a.IsLinkLocalUnicast():
		return classLinkLocal
	case a.IsMulticast():
		return classMulticast
	case isMetadata(a):
		return classMetadata
	case slices.Contains(hostServiceAddrs, a):
		return classHostService
	case discardPrefix.Contains(a):
		return classReserved
	}
	if v4s, ok := embedded4(a); ok {
		for i, v4 := range v4s {
			// 0.0.0.0/8 in a layout other than the first is what a /96
			// layout's zeros read as in the others: not counted.
			if c := classify4(v4); c != "" && (i == 0 || c != classUnspecified) {
				return c
			}
		}
		return ""
	}
	if a.IsPrivate() {
		return classPrivate
	}
	return ""
}

func classify4(a netip.Addr) addrClass {
	switch {
	case a.IsLoopback():
		return classLoopback
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return classUnspecified
	case isMetadata(a):
		return classMetadata
	case slices.Contains(hostServiceAddrs, a):
		return classHostService
	case a.IsLinkLocalUnicast():
		return classLinkLocal
	case a.IsMulticast():
		return classMulticast
	case a == broadcast4:
		return classBroadcast
	case reserved4.Contains(a):
		return classReserved
	case a.IsPrivate() || cgnat.Contains(a):
		return classPrivate
	}
	return ""
}

func isMetadata(a netip.Addr) bool { return slices.Contains(metadataAddrs, a) }

// embedded4 extracts the IPv4 addresses carried inside an IPv6 address by
// the transition mechanisms that route to it: one, but for the local-use
// NAT64 prefix 64:ff9b:1::/48 (RFC 8215), within which the operator picks
// the prefix length, and with it where the IPv4 address sits (RFC 6052's
// layouts for 48 to 96 bits); each layout's is given, /96's first, as any
// of them may be the one a translator there reads (64:ff9b:1:7f00:0:100:808:808 is
// 127.0.0.1 under a /48 layout, 8.8.8.8 under /96).
func embedded4(a netip.Addr) ([]netip.Addr, bool) {
	b := a.As16()
	at := func(i ...int) netip.Addr { return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]}) }
	switch {
	case ipv4Compat.Contains(a), nat64.Contains(a):
		return []netip.Addr{at(12, 13, 14, 15)}, true
	case nat64Local.Contains(a):
		// The /96 layout first; then /64, /56 and /48 (a prefix within
		// 64:ff9b:1::/48 is no shorter); byte 8 (the "u" octet) is never
		// part of the address.
		return []netip.Addr{at(12, 13, 14, 15), at(9, 10, 11, 12), at(7, 9, 10, 11), at(6, 7, 9, 10)}, true
	case sixToFour.Contains(a):
		return []netip.Addr{at(2, 3, 4, 5)}, true
	case teredo.Contains(a):
		// The client address is the last 32 bits, inverted.
		v := binary.BigEndian.Uint32(b[12:16]) ^ 0xffffffff
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], v)
		return []netip.Addr{netip.AddrFrom4(c)}, true
	}
	return nil, false
}

// classRange is the range an address's class occupies: an allow entry
// exempts a special address from the dialer's refusal only if it lies
// within that range (127.0.0.1 or 127.0.0.0/8 for loopback, not 0.0.0.0/0).
// Embedded and one-off addresses need an entry for that very address.
func classRange(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	for _, r := range specialRanges {
		if r.Contains(a) && !isMetadata(a) {
			if _, embedded := embedded4(a); !embedded || !a.Is6() {
				return r
			}
		}
	}
	return netip.PrefixFrom(a, a.BitLen())
}

// specialRanges are the classes' ranges, for classRange.
var specialRanges = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	thisNetwork,
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	reserved4,
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
	discardPrefix,
}

// reaches lists what dialling a really reaches, for deny rules: a itself,
// the IPv4 address an IPv6 form embeds, and for an unspecified address
// (which connects to this host) the loopback addresses.
func reaches(a netip.Addr) []netip.Addr {
	a = a.Unmap()
	out := []netip.Addr{a}
	if v4s, ok := embedded4(a); ok && a.Is6() {
		out = append(out, v4s...)
		a = v4s[0]
	}
	if a.IsUnspecified() || (a.Is4() && thisNetwork.Contains(a)) {
		out = append(out, netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback())
	}
	return out
}
