//go:build linux

package linux

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// holderConfig is what the launcher tells the holder, over a pipe.
type holderConfig struct {
	Rules NetRules `json:"rules"`
	// Token authenticates the relay's CONNECTs to the proxy.
	Token string `json:"token"`
	// LaunchFDs are the launcher's descriptors (of 3 to 6) to hand to
	// bwrap; the others are closed there. The holder's own descriptors
	// may take the free numbers, and must never reach the sandbox.
	LaunchFDs []int `json:"launch_fds"`
}

// holderConfigFD is where the holder finds its config: the launcher
// passes its own four descriptors first (3 to 6), then the holder's.
const holderConfigFD = 7

// holderBlockFD is bwrap's --block-fd as the holder passes it, after the
// launcher's four.
const holderBlockFD = 7

// The addresses slirp4netns gives the namespace.
var (
	slirpGateway = netip.MustParseAddr("10.0.2.2")
	slirpGuest   = netip.MustParseAddr("10.0.2.100")
)

// relayPort is the holder's relay inside the namespace (127.0.0.1).
const relayPort = 15001

// RunHolder is the holder: it runs as root of a fresh user and network
// namespace (and nothing more), waits for slirp4netns to bring tap0 up,
// installs the nftables policy, relays every other TCP connection to the
// proxy as a CONNECT to its original destination, and runs bwrap (argv) as
// its child, exiting with bwrap's status.
func RunHolder(argv []string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "cordon: restricted network: %v\n", err)
		return ExitLaunchFailed
	}
	var cfg holderConfig
	f := os.NewFile(holderConfigFD, "holder-config")
	if err := json.NewDecoder(io.LimitReader(f, 1<<16)).Decode(&cfg); err != nil {
		return fail(fmt.Errorf("read the holder's config: %w", err))
	}
	f.Close()
	if len(argv) == 0 {
		return fail(errors.New("no command for the holder"))
	}
	if err := linkUp("lo"); err != nil {
		return fail(err)
	}
	// The rules name interfaces, not indexes, so they go in while
	// slirp4netns is still starting: tap0 comes up under them.
	if err := cfg.Rules.Install(); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", cfg.Rules.RelayPort))
	if err != nil {
		return fail(fmt.Errorf("relay: %w", err))
	}
	proxy := netip.AddrPortFrom(cfg.Rules.Gateway, cfg.Rules.ProxyPort).String()
	go relay(ln, proxy, cfg.Token)

	// bwrap builds the box while slirp4netns brings tap0 up, and waits on
	// --block-fd (after every mount, before the command) until it is.
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer blockW.Close()
	argv = append([]string{argv[0], "--block-fd", strconv.Itoa(holderBlockFD)}, argv[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	// The launcher's descriptors 3 to 6 pass on as they came. One it left
	// closed stays closed in bwrap, whatever the holder itself opened
	// under that number (a netlink socket of this namespace's root would
	// be a way out).
	for fd := 3; fd <= 6; fd++ {
		var f *os.File
		if slices.Contains(cfg.LaunchFDs, fd) {
			f = os.NewFile(uintptr(fd), "launch-"+strconv.Itoa(fd))
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, blockR)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start bwrap: %w", err))
	}
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			f.Close()
		}
	}
	if err := waitForAddr("tap0", slirpGuest, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(err)
	}
	if _, err := blockW.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("let bwrap start the command: %w", err))
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return fail(err)
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

// waitForAddr waits until slirp4netns has configured the interface.
func waitForAddr(name string, want netip.Addr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if ifi, err := net.InterfaceByName(name); err == nil {
			addrs, _ := ifi.Addrs()
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == want {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slirp4netns did not configure %s within %s", name, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// relay hands each redirected connection to the proxy as a CONNECT to its
// original destination, so the proxy judges and logs it.
func relay(ln net.Listener, proxy, token string) {
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+token))
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go relayOne(c.(*net.TCPConn), proxy, auth)
	}
}

func relayOne(c *net.TCPConn, proxy, auth string) {
	defer c.Close()
	dst, err := originalDst(c)
	if err != nil {
		return // not a redirected connection
	}
	up, err := net.DialTimeout("tcp4", proxy, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	up.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(up, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\nX-Cordon-Transparent: 1\r\n\r\n", dst, dst, auth)
	br := bufio.NewReader(up)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return
	}
	up.SetDeadline(time.Time{})
	if resp.StatusCode != http.StatusOK {
		// A plain-HTTP client gets the refusal and its reason; others see
		// the connection close.
		if dst.Port() == 80 {
			resp.Write(c)
		}
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(done)
	}()
	io.Copy(c, br)
	c.CloseWrite()
	<-done
}

// originalDst is where a redirected connection was headed.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
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
