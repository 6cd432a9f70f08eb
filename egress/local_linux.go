package egress

import (
	"fmt"
	"net/netip"
	"syscall"
)

// LocalRanges lists the ranges the kernel delivers to this host itself
// beyond loopback: its local routes, in every routing table. Besides one
// route per interface address, these include AnyIP ranges (`ip route add
// local 10.77.0.0/24 dev lo`, or the IPv6 range a cloud VM is given),
// every address of which reaches the services this host listens on at
// the unspecified address.
func LocalRanges() ([]netip.Prefix, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("read the local routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("read the local routes: %w", err)
	}
	var out []netip.Prefix
	for i := range msgs {
		if p, ok := localRoute(&msgs[i]); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// localRoute is the destination of a route message of type local, unless
// it is loopback (which classify already refuses, with its own range).
func localRoute(m *syscall.NetlinkMessage) (netip.Prefix, bool) {
	// The rtmsg header: family, dst_len, src_len, tos, table, protocol,
	// scope, type.
	if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg || m.Data[7] != syscall.RTN_LOCAL {
		return netip.Prefix{}, false
	}
	bits := int(m.Data[1])
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return netip.Prefix{}, false
	}
	for _, a := range attrs {
		if a.Attr.Type != syscall.RTA_DST {
			continue
		}
		addr, ok := netip.AddrFromSlice(a.Value)
		if !ok || addr.IsLoopback() {
			return netip.Prefix{}, false
		}
		p, err := addr.Prefix(bits)
		return p, err == nil
	}
	return netip.Prefix{}, false
}
