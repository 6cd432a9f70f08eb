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
	if v4, ok := embedded4(a); ok {
		if c := classify4(v4); c != "" {
			return c
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

// embedded4 extracts the IPv4 address carried inside an IPv6 address by the
// transition mechanisms that route to it.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case ipv4Compat.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case nat64.Contains(a), nat64Local.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(a):
		// The client address is the last 32 bits, inverted.
		v := binary.BigEndian.Uint32(b[12:16]) ^ 0xffffffff
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], v)
		return netip.AddrFrom4(c), true
	}
	return netip.Addr{}, false
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
	if v4, ok := embedded4(a); ok && a.Is6() {
		out = append(out, v4)
		a = v4
	}
	if a.IsUnspecified() || (a.Is4() && thisNetwork.Contains(a)) {
		out = append(out, netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback())
	}
	return out
}
