//go:build linux

package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// Restricted is the Holder of restricted mode: bwrap starts inside a
// holder process that was cloned straight into a new user and network
// namespace, slirp4netns gives that namespace its only link (to the host's
// loopback, where cordon's proxy and resolver listen), and the holder's
// nftables policy sends everything through them.
type Restricted struct {
	// Self is cordon's binary; it runs the holder (`cordon __holder`).
	// Empty means the running executable.
	Self string
	// Slirp is the slirp4netns binary; empty means looked up on PATH.
	Slirp string
	// Probe, when set, proves the whole path end to end (a tiny box whose
	// allowed name must connect through the proxy and whose denied name
	// must not resolve); restricted mode is READY only if it passes.
	Probe func(ctx context.Context) error
}

// Check reports whether restricted mode's parts are present here and, with
// a Probe, whether they really confine a box.
func (r *Restricted) Check(ctx context.Context) sandbox.Capability {
	c := sandbox.Capability{Name: "network restricted"}
	if _, err := r.slirp(); err != nil {
		c.Status, c.Reason, c.Fix = sandbox.Blocked, err.Error(), "install slirp4netns (Debian/Ubuntu: apt-get install slirp4netns)"
		return c
	}
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		c.Status, c.Reason = sandbox.Blocked, fmt.Sprintf("slirp4netns needs /dev/net/tun: %v", err)
		c.Fix = "load the tun module and make /dev/net/tun readable and writable (chmod 0666 /dev/net/tun)"
		return c
	}
	f.Close()
	if r.Probe != nil {
		if err := r.probe(ctx); err != nil {
			c.Status, c.Reason = sandbox.Blocked, "the end-to-end probe failed: "+err.Error()
			c.Fix = "run cordon doctor --net restricted for the other capabilities' state; check that nftables is in the kernel (modprobe nf_tables) and that slirp4netns can reach the host's loopback"
			return c
		}
		c.Status, c.Reason = sandbox.Ready, "probed end to end: an allowed name resolved and connected through cordon's proxy, a denied name did not resolve, and the host's loopback was out of reach"
		return c
	}
	c.Status, c.Reason = sandbox.Ready, "slirp4netns, /dev/net/tun and nftables in a private network namespace; every TCP connection goes through cordon's proxy"
	return c
}

func (r *Restricted) slirp() (string, error) {
	if r.Slirp != "" {
		return r.Slirp, nil
	}
	p, err := exec.LookPath("slirp4netns")
	if err != nil {
		return "", errors.New("slirp4netns is not installed")
	}
	return p, nil
}

// Wrap starts the holder in place of bwrap, handing it the network's
// ports and the proxy token over a pipe.
func (r *Restricted) Wrap(s *sandbox.Spec, argv []string, fds []int) ([]string, []*os.File, error) {
	n := s.Network
	if n == nil || n.ProxyPort == 0 || n.DNSPort == 0 {
		return nil, nil, errors.New("restricted mode needs the proxy and resolver ports")
	}
	cfg := holderConfig{
		Rules:     NetRules{Gateway: slirpGateway, ProxyPort: uint16(n.ProxyPort), DNSPort: uint16(n.DNSPort), RelayPort: relayPort},
		Token:     n.Token,
		LaunchFDs: fds,
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	err = json.NewEncoder(pw).Encode(cfg)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	self := r.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			pr.Close()
			return nil, nil, fmt.Errorf("find cordon's own binary for the holder: %w", err)
		}
	}
	return append([]string{self, "__holder", "--"}, argv...), []*os.File{pr}, nil
}

// SysProcAttr clones the holder into its own user and network namespace,
// root there and nowhere else.
func (r *Restricted) SysProcAttr(a *syscall.SysProcAttr, uid, gid int) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	// Become the namespace's root, which maps to uid and gid outside: from
	// a root cordon this is how the holder drops to run_as.
	a.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
}

// Started attaches slirp4netns to the holder's namespace. The returned stop
// ends it; slirp4netns also exits on its own if cordon dies (its exit fd
// closes).
func (r *Restricted) Started(ctx context.Context, s *sandbox.Spec, pid int) (func() string, error) {
	path, err := r.slirp()
	if err != nil {
		return nil, err
	}
	exitR, exitW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--configure", "--mtu=65520", "--disable-dns", "--enable-sandbox", "--enable-seccomp",
		"--exit-fd=3", strconv.Itoa(pid), "tap0")
	cmd.ExtraFiles = []*os.File{exitR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out := &limitedBuf{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		exitR.Close()
		exitW.Close()
		return nil, fmt.Errorf("start slirp4netns: %w", err)
	}
	exitR.Close()
	done := make(chan struct{})
	var stopping atomic.Bool
	var died string // set before done is closed
	go func() {
		err := cmd.Wait()
		if !stopping.Load() {
			// The namespace lost its only link: from now on every
			// connection fails, and nothing falls back to another route.
			died = fmt.Sprintf("slirp4netns exited while the command ran (%v): the sandbox had no network from then on", err)
			fmt.Fprintf(os.Stderr, "cordon: %s; rerun the command to get it back\n", died)
		}
		close(done)
	}()
	return func() string {
		stopping.Store(true)
		exitW.Close()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return died
	}, nil
}

// limitedBuf keeps the start of a helper's output for error messages.
type limitedBuf struct {
	b   []byte
	max int
}

func (l *limitedBuf) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// probe runs Probe, or reuses a recent pass (see memo).
func (r *Restricted) probe(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return r.Probe(ctx)
	}
	slirp, err := r.slirp()
	if err != nil {
		return err
	}
	files := []string{self, slirp}
	if bw, err := exec.LookPath("bwrap"); err == nil {
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
