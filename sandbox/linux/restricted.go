//go:build linux

package linux

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
)

// Restricted is restricted mode's network: bwrap starts inside a holder
// process that was cloned straight into a new user and network namespace. The namespace has no link anywhere: its only way out is the
// proxy and the resolver, which serve sockets the holder makes inside it
// and hands to cordon, and its nftables policy sends everything to them.
type Restricted struct {
	// Self is cordon's binary; it runs the holder (`cordon __holder`).
	// Empty means the running executable.
	Self string
	// Probe, when set, proves the whole path end to end (a tiny box whose
	// allowed name must connect through the proxy and whose denied name
	// must not resolve); restricted mode is READY only if it passes.
	Probe func(ctx context.Context) error
}

// Check reports whether restricted mode confines a box here: with a
// Probe, proven end to end.
func (r *Restricted) Check(ctx context.Context) sandbox.Capability {
	c := sandbox.Capability{Name: sandbox.CapNetRestricted}
	if r.Probe != nil {
		if err := r.probe(ctx); err != nil {
			c.Status, c.Reason = sandbox.Blocked, "the end-to-end probe failed: "+err.Error()
			c.Fix = "run cordon doctor --net restricted for the other capabilities' state; check that nftables is in the kernel (modprobe nf_tables nft_nat nft_reject_inet)"
			return c
		}
		c.Status, c.Reason = sandbox.Ready, "probed end to end: an allowed name resolved and connected through cordon's proxy, a denied name did not resolve, and a direct connection to the gateway did not get through"
	} else {
		c.Status, c.Reason = sandbox.Ready, "nftables in a private network namespace with no link out; every TCP connection goes through cordon's proxy"
	}
	if self, err := r.self(); err == nil {
		if bin, args := holderCommand(self); len(args) == 0 {
			c.Reason += "; holder " + bin
		} else {
			c.Reason += "; holder: cordon itself (no cordon-holder beside it, so each restricted run starts a little slower)"
		}
	}
	return c
}

// planText says, for --dry-run, what the holder does before it execs the
// launcher argv.
func planText() string {
	r := holder.Network
	return fmt.Sprintf(`cordon __holder, cloned into a new user and network namespace (root there and nowhere else), sets the namespace up, then execs the launcher argv in it:
- lo up, with %[1]s/32 added, and the default route through lo: no other interface
- listens on tcp %[1]s:%[2]d (the proxy), tcp 127.0.0.1:%[3]d (the transparent listener), udp and tcp %[1]s:53 (the resolver), and hands these sockets to cordon
- nftables:
%[4]s`, r.Gateway, r.ProxyPort, r.RelayPort, r)
}

// held is a started holder. It sets up the network namespace while the
// launcher finishes (the proxy, the launch line), and execs bwrap only
// once launch sends bwrap's command line: nothing of the command runs
// before that.
type held struct {
	child *child
	cg    *runCgroup // the run's cgroup, if limits use one; nil otherwise
	sock  *os.File   // cordon's end of the socket pair
	// launched is set once launch has sent the command line.
	launched bool
}

// start starts the holder for a run as h's uid and gid, cloned into its
// own user and network namespace (root there and nowhere else), in the
// run's cgroup when limits use one.
func (r *Restricted) start(h hostInfo) (*held, error) {
	self, err := r.self()
	if err != nil {
		return nil, fmt.Errorf("find cordon's own binary for the holder: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair for the holder: %w", err)
	}
	hd := &held{sock: os.NewFile(uintptr(sp[0]), "holder")}
	theirs := os.NewFile(uintptr(sp[1]), "holder")
	defer theirs.Close()

	bin, args := holderCommand(self)
	// /dev/null holds bwrap's numbers, 3 to holder.LastLaunchFD, until the launch.
	files := []*os.File{null, null, os.Stderr}
	for range holder.LastLaunchFD - 2 {
		files = append(files, null)
	}
	files = append(files, theirs)
	sys := &syscall.SysProcAttr{
		Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: h.uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: h.gid, Size: 1}},
		// Become the namespace's root, which maps to uid and gid outside:
		// from a root cordon this is how the holder drops to run_as.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	if h.limits.cgroupParent != "" {
		if hd.cg, err = newRunCgroup(h.limits, h.uid, h.gid); err != nil {
			hd.sock.Close()
			return nil, err
		}
		sys.UseCgroupFD, sys.CgroupFD = true, int(hd.cg.fd.Fd())
	}
	closeInherited()
	// One P is all the holder needs. More would only start threads that
	// compete with cordon and bwrap for the same cores while the run
	// starts (about 2 ms of a restricted run's start-up on two cores).
	if hd.child, err = startChild(append([]string{bin}, args...), []string{"GOMAXPROCS=1"}, files, sys, nil); err != nil {
		hd.close()
		return nil, fmt.Errorf("start the holder: %w", err)
	}
	return hd, nil
}

// self is cordon's own binary.
func (r *Restricted) self() (string, error) {
	if r.Self != "" {
		return r.Self, nil
	}
	return os.Executable()
}

// holderCommand is how the holder starts: cordon-holder from beside
// cordon's binary (holderPath), a small program that starts in about 60%
// of the time, or else cordon itself.
func holderCommand(self string) (string, []string) {
	p := holderPath(self)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p, nil
	}
	return self, []string{"__holder"}
}

// holderPath is where cordon-holder is looked for: beside cordon's binary
// self. Every box guards it (sandbox.GuardSpec.Own), so that none can plant
// a holder there for a later run to start outside any box.
func holderPath(self string) string { return filepath.Join(filepath.Dir(self), "cordon-holder") }

// launch sends bwrap's command line, with the command's stdio and the
// launcher's descriptors (files, under the numbers fds), for the holder to
// exec.
func (hd *held) launch(argv []string, stdio [3]*os.File, files []*os.File, fds []int) error {
	hd.launched = true
	return holder.SendLaunch(int(hd.sock.Fd()), holder.Launch{Argv: argv, LaunchFDs: fds}, stdio, files)
}

// attach receives the network's sockets from the holder and hands them to
// n.Serve.
func (hd *held) attach(ctx context.Context, n *sandbox.Network) error {
	if n == nil || n.Serve == nil {
		return errors.New("restricted mode needs the session's proxy to serve the sandbox's network")
	}
	sk, err := receiveSockets(ctx, hd.sock)
	if err != nil {
		return err
	}
	if err := n.Serve(sk); err != nil {
		sk.Close()
		return err
	}
	return nil
}

// kill ends the holder, or the bwrap it became, and waits for it: a
// launched sandbox that never got the go-ahead has run nothing.
func (hd *held) kill() {
	hd.child.signal(unix.SIGKILL)
	hd.child.wait()
}

// close ends a holder that was never launched (its socket closes, and it
// exits), and lets go of what it held.
func (hd *held) close() {
	hd.sock.Close()
	if hd.child != nil && !hd.launched {
		hd.kill()
	}
	if hd.cg != nil && !hd.launched {
		hd.cg.remove()
	}
}

// holderTimeout bounds the wait for the holder's sockets.
const holderTimeout = 10 * time.Second

// receiveSockets takes the network's sockets from the holder and makes
// them the sandbox's Sockets.
func receiveSockets(ctx context.Context, f *os.File) (sandbox.Sockets, error) {
	deadline := time.Now().Add(holderTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	files, err := holder.ReceiveSockets(f, deadline)
	if err != nil {
		return sandbox.Sockets{}, err
	}
	var sk sandbox.Sockets
	for _, f := range files {
		defer f.Close()
	}
	listener := func(f *os.File) net.Listener {
		l, e := net.FileListener(f)
		err = errors.Join(err, e)
		return l
	}
	sk.Proxy = listener(files[0])
	sk.Transparent = listener(files[1])
	pc, e := net.FilePacketConn(files[2])
	sk.DNS, err = pc, errors.Join(err, e)
	sk.DNSTCP = listener(files[3])
	sk.Dest, sk.Own = holder.OriginalDst, holder.Network.Own()
	if err != nil {
		sk.Close()
		return sandbox.Sockets{}, fmt.Errorf("the holder's sockets: %w", err)
	}
	return sk, nil
}

// probe runs Probe, or reuses a recent pass (see memo).
func (r *Restricted) probe(ctx context.Context) error {
	self, err := r.self()
	if err != nil {
		return r.Probe(ctx)
	}
	bin, _ := holderCommand(self)
	files := []string{self, bin}
	if bw, err := lookHelper("bwrap", os.Getenv("PATH")); err == nil {
		files = append(files, bw)
	}
	var perr error
	memoised(ctx, memoKey("restricted", files, nil), func(sandbox.Capability) {},
		func(add func(sandbox.Capability)) map[string]probeResult {
			if perr = r.Probe(ctx); perr != nil {
				add(sandbox.Capability{Name: sandbox.CapNetRestricted, Status: sandbox.Blocked})
			}
			return nil
		})
	return perr
}
