//go:build linux

// Package holder is the first process of a restricted run's network
// namespace, and the protocol cordon speaks with it. Cloned by cordon into
// a fresh user and network namespace, it gives the namespace its only
// addresses and routes, installs the nftables policy (Rules), makes the
// proxy's, the transparent listener's and the resolver's sockets there,
// hands them to cordon, and execs bwrap when cordon says. It is its own
// package, with few dependencies, so that its binary (cordon-holder)
// starts fast.
package holder

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The restricted network's addresses, inside its namespace. The gateway is
// a second address of the namespace's loopback: the proxy and the
// resolver listen there, and nothing else does.
var Gateway = netip.MustParseAddr("10.0.2.2")

// ProxyPort is the proxy's port on Gateway.
const ProxyPort = 3128

// RelayPort is the transparent listener, on 127.0.0.1 in the namespace:
// every other TCP connection is redirected to it.
const RelayPort = 15001

// Network is the restricted network every holder sets up.
var Network = Rules{Gateway: Gateway, ProxyPort: ProxyPort, RelayPort: RelayPort}

// ExitFailed is the holder's exit code when it cannot set up the
// namespace or start bwrap: cordon's "the sandbox never started".
const ExitFailed = 125

// LastLaunchFD is the highest of the numbers bwrap gets the launcher's
// descriptors under, from 3.
const LastLaunchFD = 7

// SocketsFD is where the holder finds its end of a socket pair with the
// launcher. The launcher starts it with /dev/null on 0, 1 and 3 to
// LastLaunchFD (holding those numbers for what comes later) and its own
// stderr on 2. Over the pair the holder sends the network's sockets (see
// SocketCount), and then receives one Launch with the descriptors it
// names.
const SocketsFD = LastLaunchFD + 1

// Launch is what the launcher sends once the run's launch line is
// written: bwrap's command line, and with it (SCM_RIGHTS) the command's
// stdin, stdout and stderr, then one descriptor for each of LaunchFDs.
type Launch struct {
	Argv []string `json:"argv"`
	// LaunchFDs are the numbers (of 3 to LastLaunchFD) bwrap gets the launcher's
	// descriptors under; the others are closed there. The holder's own
	// descriptors may take the free numbers, and must never reach the
	// sandbox.
	LaunchFDs []int `json:"launch_fds"`
}

// MaxLaunch bounds the launch message.
const MaxLaunch = 1 << 20

// Run is the holder: it runs as root of a fresh user and network
// namespace (and nothing more), gives the namespace's loopback the gateway
// address and the default route, installs the nftables policy, makes the
// proxy's, the transparent listener's and the resolver's sockets, sends
// them to the launcher, and then waits for the launch, to exec bwrap. It
// returns only on failure, or when the launcher gives up on the run.
func Run() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "cordon: restricted network: %v\n", err)
		return ExitFailed
	}
	rules := Network
	if err := loopbackGateway(rules.Gateway); err != nil {
		return fail(err)
	}
	if err := rules.Install(); err != nil {
		return fail(err)
	}
	files, err := rules.listen()
	if err != nil {
		return fail(err)
	}
	if err := sendFiles(SocketsFD, []byte{1}, files); err != nil {
		if gaveUp(err) {
			return ExitFailed // the launcher ended first, and says why
		}
		return fail(fmt.Errorf("hand the network's sockets to cordon: %w", err))
	}
	for _, f := range files {
		f.Close()
	}

	l, fds, err := receiveLaunch(SocketsFD)
	if err != nil {
		return fail(err)
	}
	if l == nil {
		return ExitFailed // the launcher gave up before the launch
	}
	// The command's stdio, then the launcher's descriptors under their
	// numbers, over the placeholders the holder was started with.
	targets := append([]int{0, 1, 2}, l.LaunchFDs...)
	if len(fds) != len(targets) {
		return fail(fmt.Errorf("the launch brought %d descriptors, want %d", len(fds), len(targets)))
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, targets[i], 0); err != nil {
			return fail(fmt.Errorf("place descriptor %d: %w", targets[i], err))
		}
	}
	// bwrap gets those and no other: a number of 3 to LastLaunchFD the launcher did
	// not name stays closed, whatever the holder opened under it (a
	// netlink socket of this namespace's root would be a way out).
	for fd := 3; fd <= SocketsFD; fd++ {
		if fd > LastLaunchFD || !slices.Contains(l.LaunchFDs, fd) {
			unix.CloseOnExec(fd)
		}
	}
	// bwrap gets no environment either: it stays in the box as pid 1,
	// whose environ the command can read.
	err = syscall.Exec(l.Argv[0], l.Argv, []string{})
	return fail(fmt.Errorf("exec %s: %w", l.Argv[0], err))
}

// SendLaunch is the launcher's half of receiveLaunch: it sends l on the
// socket fd, with stdio (stdin, stdout, stderr) and then files, one for
// each of l.LaunchFDs.
func SendLaunch(fd int, l Launch, stdio [3]*os.File, files []*os.File) error {
	if len(files) != len(l.LaunchFDs) {
		return fmt.Errorf("the launch names %d descriptors and brings %d", len(l.LaunchFDs), len(files))
	}
	msg, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if len(msg) > MaxLaunch {
		return fmt.Errorf("bwrap's command line is %d bytes, more than the holder takes (%d)", len(msg), MaxLaunch)
	}
	if err := sendFiles(fd, msg, append(stdio[:], files...)); err != nil {
		return fmt.Errorf("send the launch to the holder: %w", err)
	}
	return nil
}

// sendFiles sends msg on the socket fd with files' descriptors.
func sendFiles(fd int, msg []byte, files []*os.File) error {
	rights := make([]int, len(files))
	for i, f := range files {
		rights[i] = int(f.Fd())
	}
	return unix.Sendmsg(fd, msg, unix.UnixRights(rights...), nil, 0)
}

// SocketCount is how many sockets the holder sends: the proxy's listener,
// the transparent listener, the resolver's UDP socket and its TCP
// listener, in that order.
const SocketCount = 4

// ReceiveSockets is the launcher's half of the holder's first message: it
// reads the network's sockets (see SocketCount for their order) from f, by
// deadline. A holder that failed first closes its end, and its own
// message, on stderr, says why.
func ReceiveSockets(f *os.File, deadline time.Time) ([]*os.File, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	uc.SetReadDeadline(deadline)
	oob := make([]byte, unix.CmsgSpace(SocketCount*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(make([]byte, 1), oob)
	if errors.Is(err, io.EOF) || err == nil && n == 0 {
		return nil, errors.New("the holder ended before it made the network's sockets")
	}
	if err != nil {
		return nil, fmt.Errorf("the holder sent no sockets: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("the holder's message: %w", err)
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("the holder's message holds %d control messages, want 1", len(msgs))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, err
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "sandbox-socket")
	}
	if len(files) != SocketCount {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("the holder sent %d sockets, want %d", len(files), SocketCount)
	}
	return files, nil
}

// gaveUp says whether err, on the socket pair, means that the launcher
// ended without a launch: a run refused while its network was being set
// up (a missing extra CA, say) closes its end with the holder's message
// unread, which resets the pair. The launcher says why; the holder ends
// quietly.
func gaveUp(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

// receiveLaunch reads the launch message and its descriptors (received
// close-on-exec) from the socket fd. A nil launch means the launcher
// gave up first (it closed its end, or ended).
func receiveLaunch(fd int) (*Launch, []int, error) {
	buf := make([]byte, MaxLaunch)
	oob := make([]byte, unix.CmsgSpace((LastLaunchFD+1)*4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil && !gaveUp(err) {
		return nil, nil, fmt.Errorf("wait for the launch: %w", err)
	}
	if n == 0 || err != nil {
		return nil, nil, nil // the launcher gave up first, and says why
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, nil, fmt.Errorf("the launch's descriptors: %w", err)
	}
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("the launch's descriptors: %w", err)
		}
		fds = append(fds, got...)
	}
	var l Launch
	if err := json.Unmarshal(buf[:n], &l); err != nil {
		return nil, nil, fmt.Errorf("read the launch: %w", err)
	}
	if len(l.Argv) == 0 {
		return nil, nil, errors.New("the launch names no command")
	}
	for _, fd := range l.LaunchFDs {
		if fd < 3 || fd > LastLaunchFD {
			return nil, nil, fmt.Errorf("the launch names descriptor %d; bwrap's are 3 to %d", fd, LastLaunchFD)
		}
	}
	return &l, fds, nil
}

// listen makes the network's sockets, in the order they are sent (see SocketCount):
// proxy, transparent listener, resolver (UDP, then TCP).
func (r Rules) listen() ([]*os.File, error) {
	proxy := netip.AddrPortFrom(r.Gateway, r.ProxyPort).String()
	dns := netip.AddrPortFrom(r.Gateway, 53).String()
	var files []*os.File
	add := func(c interface{ File() (*os.File, error) }, err error) error {
		if err != nil {
			return err
		}
		f, err := c.File()
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	}
	err := errors.Join(
		add(listenTCP(proxy)),
		add(listenTCP(fmt.Sprintf("127.0.0.1:%d", r.RelayPort))),
		add(listenUDP(dns)),
		add(listenTCP(dns)),
	)
	if err != nil {
		return nil, fmt.Errorf("listen in the sandbox's network: %w", err)
	}
	return files, nil
}

// listenTCP listens on addr with TCP alone. Go's default listener is a
// Multipath TCP one, and a connection from a client that speaks MPTCP to
// it has no original destination to read (SO_ORIGINAL_DST is TCP's): the
// transparent listener refused it as never redirected, naming no host.
// Offered no MPTCP, such a client falls back to TCP.
func listenTCP(addr string) (*net.TCPListener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}

func listenUDP(addr string) (*net.UDPConn, error) {
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// loopbackGateway brings the namespace's loopback up, gives it the
// gateway's address, and routes every other IPv4 address through it, so a
// connection anywhere meets the nftables policy instead of "network
// unreachable". Nothing leaves: the namespace has no other interface.
func loopbackGateway(gw netip.Addr) error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := linkUp("lo"); err != nil {
		return err
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return fmt.Errorf("rtnetlink: %w", err)
	}
	defer c.Close()
	idx := binary.NativeEndian.AppendUint32(nil, uint32(lo.Index))
	a := gw.As4()

	ae := netlink.NewAttributeEncoder()
	ae.Bytes(unix.IFA_LOCAL, a[:])
	ae.Bytes(unix.IFA_ADDRESS, a[:])
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	// struct ifaddrmsg: family, prefix length, flags, scope, index.
	ifa := append([]byte{unix.AF_INET, 32, 0, unix.RT_SCOPE_UNIVERSE}, idx...)
	if err := rtRequest(c, unix.RTM_NEWADDR, append(ifa, attrs...)); err != nil {
		return fmt.Errorf("add %s to lo: %w", gw, err)
	}

	ae = netlink.NewAttributeEncoder()
	ae.Bytes(unix.RTA_OIF, idx)
	if attrs, err = ae.Encode(); err != nil {
		return err
	}
	// struct rtmsg: family, dst and src length, tos, table, protocol,
	// scope, type, then 32 bits of flags.
	rtm := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK, unix.RTN_UNICAST, 0, 0, 0, 0}
	if err := rtRequest(c, unix.RTM_NEWROUTE, append(rtm, attrs...)); err != nil {
		return fmt.Errorf("route through lo: %w", err)
	}
	return nil
}

func rtRequest(c *netlink.Conn, typ netlink.HeaderType, data []byte) error {
	_, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl},
		Data:   data,
	})
	return err
}

// linkUp brings an interface up.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}

// OriginalDst is where a connection redirected to the transparent
// listener was headed.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("not a TCP connection: %T", c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		// SO_ORIGINAL_DST returns a sockaddr_in; IPv6Mreq is a 20-byte
		// buffer that holds it.
		m, e := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if e != nil {
			serr = e
			return
		}
		b := m.Multiaddr
		port := binary.BigEndian.Uint16(b[2:4])
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	})
	if err == nil {
		err = serr
	}
	return ap, err
}
