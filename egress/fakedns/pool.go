package fakedns

import (
	"errors"
	"fmt"
	"net/netip"
)

// errRangeFull is returned once every address of the range is handed out.
var errRangeFull = errors.New("fake address range used up")

// pool hands out the addresses of a prefix in order, skipping the prefix's
// first and last address and every address ending in .0 or .255.
type pool struct {
	prefix netip.Prefix
	last   netip.Addr
	// next is the address the next allocation gets; invalid once the
	// range is used up.
	next netip.Addr
}

func newPool(prefix netip.Prefix) (pool, error) {
	if !prefix.Addr().Is4() {
		return pool{}, fmt.Errorf("fake address range %s is not IPv4; use a range such as %s", prefix, DefaultRange)
	}
	prefix = prefix.Masked()
	p := pool{prefix: prefix, last: lastAddr(prefix)}
	first, ok := p.after(prefix.Addr())
	if !ok {
		return pool{}, fmt.Errorf("fake address range %s holds no usable address; use a /30 or wider, such as %s", prefix, DefaultRange)
	}
	p.next = first
	return p, nil
}

// peek returns the address the next allocation gets.
func (p *pool) peek() (netip.Addr, error) {
	if !p.next.IsValid() {
		return netip.Addr{}, errRangeFull
	}
	return p.next, nil
}

// advance hands out the address peek returned.
func (p *pool) advance() {
	p.next, _ = p.after(p.next)
}

// after returns the first usable address after a, if any.
func (p *pool) after(a netip.Addr) (netip.Addr, bool) {
	for a = a.Next(); a.IsValid() && p.prefix.Contains(a); a = a.Next() {
		b := a.As4()
		if a != p.last && b[3] != 0 && b[3] != 255 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
