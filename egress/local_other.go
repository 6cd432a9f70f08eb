//go:build !linux

package egress

import "net/netip"

// LocalRanges lists the ranges the kernel delivers to this host itself;
// only Linux's are read (OwnAddrs covers the interface addresses).
func LocalRanges() ([]netip.Prefix, error) { return nil, nil }
