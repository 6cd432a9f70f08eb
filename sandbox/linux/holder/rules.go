//go:build linux

package holder

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Rules is the restricted network's nftables policy. The holder installs
// it, over netlink, in the network namespace it owns; the sandboxed
// process, one user namespace deeper, cannot change it.
//
// The namespace has no interface but its loopback, which also holds the
// gateway address, where cordon's proxy and resolver listen, and carries
// the default route. Output is dropped by default. The namespace's own
// loopback addresses stay reachable, and so does the gateway. Every DNS
// query, to any address, goes to the resolver on the gateway; every other
// TCP connection, to any address and port but the proxy's, is redirected
// to the transparent listener, where the proxy reads its original
// destination and judges and logs it like a CONNECT. Anything else (UDP
// but DNS, ICMP, IPv6 but ::1) is refused at once.
type Rules struct {
	Gateway   netip.Addr // the proxy's and the resolver's address
	ProxyPort uint16
	RelayPort uint16 // the transparent listener on 127.0.0.1
}

// loopback8 is the first byte of IPv4's loopback addresses, 127.0.0.0/8.
var loopback8 = []byte{127}

// Own are the IPv4 addresses the namespace has of its own, which the
// output chains accept rather than redirect: its loopback and the
// gateway. A connection that reaches the transparent listener headed
// for one (the listener itself, or the gateway on a port but the
// proxy's) is for the namespace, not the host's network.
func (r Rules) Own() []netip.Prefix {
	return []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{127}), 8), netip.PrefixFrom(r.Gateway, 32)}
}

// rule is one nftables rule, with the line nft(8) would list for it.
type rule struct {
	text  string
	exprs []expr.Any
}

// filterRules are the output filter chain's rules (policy drop). The
// filter hook sees addresses after the redirect: a redirected connection
// is headed for the transparent listener on 127.0.0.1.
func (r Rules) filterRules() []rule {
	gw := r.Gateway.AsSlice()
	return []rule{
		{"ip daddr 127.0.0.0/8 accept", join(nfproto(unix.NFPROTO_IPV4), daddr(unix.NFPROTO_IPV4, loopback8), accept())},
		{fmt.Sprintf("ip daddr %s accept", r.Gateway), join(nfproto(unix.NFPROTO_IPV4), daddr(unix.NFPROTO_IPV4, gw), accept())},
		{"ip6 daddr ::1 accept", join(nfproto(unix.NFPROTO_IPV6), daddr(unix.NFPROTO_IPV6, net.IPv6loopback), accept())},
		{"meta l4proto tcp reject with tcp reset", join(l4(unix.IPPROTO_TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})},
		// nft lists icmpx port-unreachable, the default, as plain reject.
		{"reject", []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}}},
	}
}

// natRules are the output nat chain's rules.
func (r Rules) natRules() []rule {
	gw := r.Gateway.AsSlice()
	dns := netip.AddrPortFrom(r.Gateway, 53)
	return []rule{
		{fmt.Sprintf("udp dport 53 dnat to %s", dns), join(l4(unix.IPPROTO_UDP), dport(53), dnatTo(gw, 53))},
		{fmt.Sprintf("tcp dport 53 dnat to %s", dns), join(l4(unix.IPPROTO_TCP), dport(53), dnatTo(gw, 53))},
		{fmt.Sprintf("ip daddr %s tcp dport %d accept", r.Gateway, r.ProxyPort), join(daddr(unix.NFPROTO_IPV4, gw), l4(unix.IPPROTO_TCP), dport(r.ProxyPort), accept())},
		{"ip daddr 127.0.0.0/8 accept", join(daddr(unix.NFPROTO_IPV4, loopback8), accept())},
		{fmt.Sprintf("meta l4proto tcp redirect to :%d", r.RelayPort), join(l4(unix.IPPROTO_TCP), redirectTo(r.RelayPort))},
	}
}

// String is the policy as `nft list ruleset` would show it.
func (r Rules) String() string {
	var b strings.Builder
	chain := func(table, hook string, rules []rule) {
		fmt.Fprintf(&b, "table %s {\n\tchain output {\n\t\t%s\n", table, hook)
		for _, ru := range rules {
			fmt.Fprintf(&b, "\t\t%s\n", ru.text)
		}
		b.WriteString("\t}\n}\n")
	}
	chain("inet cordon", "type filter hook output priority filter; policy drop;", r.filterRules())
	chain("ip cordon_nat", "type nat hook output priority -100; policy accept;", r.natRules())
	return b.String()
}

// Install replaces cordon's tables in the current network namespace.
func (r Rules) Install() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	filter := c.AddTable(&nftables.Table{Name: "cordon", Family: nftables.TableFamilyINet})
	drop := nftables.ChainPolicyDrop
	out := c.AddChain(&nftables.Chain{
		Name: "output", Table: filter, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop,
	})
	for _, ru := range r.filterRules() {
		c.AddRule(&nftables.Rule{Table: filter, Chain: out, Exprs: ru.exprs})
	}
	nat := c.AddTable(&nftables.Table{Name: "cordon_nat", Family: nftables.TableFamilyIPv4})
	natOut := c.AddChain(&nftables.Chain{
		Name: "output", Table: nat, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest,
	})
	for _, ru := range r.natRules() {
		c.AddRule(&nftables.Rule{Table: nat, Chain: natOut, Exprs: ru.exprs})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install the nftables rules: %w", err)
	}
	return nil
}

func join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

// nfproto matches packets of one family (unix.NFPROTO_IPV4 or IPV6): in
// an inet table it must come before a match on the network header. In an
// ip table it is implied, and nft(8) cannot list a rule that says it.
func nfproto(family byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
	}
}

// daddr matches packets whose destination address, in family's network
// header, begins with prefix: a whole address, or {127} for IPv4's
// loopback /8.
func daddr(family byte, prefix []byte) []expr.Any {
	offset := uint32(16) // the destination in an IPv4 header
	if family == unix.NFPROTO_IPV6 {
		offset = 24
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(prefix))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: prefix},
	}
}

func l4(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p)},
	}
}

func dnatTo(addr []byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: addr},
		&expr.Immediate{Register: 2, Data: be16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2},
	}
}

func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: be16(port)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}

func be16(p uint16) []byte {
	b := make([]byte, 2)
	binary.BigEndian.PutUint16(b, p)
	return b
}
