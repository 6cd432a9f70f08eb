package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-sandbox/cordon/egress/fakedns"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// The restricted-network probe's fixed names: neither can exist in DNS.
const (
	probeAllowed = "probe.cordon.invalid"
	probeDenied  = "denied.cordon.invalid"
	probeReply   = "cordon-probe-ok"
)

// NetProbeCommand is the hidden command that runs inside the probe box.
const NetProbeCommand = "__netprobe"

// ProbeRestricted proves, end to end, that restricted mode works here: it
// starts a session (proxy, resolver) that allows one name, pointing at a
// stub server on this host's loopback, and runs a tiny box through b in
// which an allowed name must resolve and connect through the proxy, and a
// denied name must not resolve, and a direct connection to the host must
// not reach the stub.
func ProbeRestricted(ctx context.Context, b sandbox.Backend, in Inside) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("probe: listen for the stub server: %w", err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, probeReply) }))
	port := ln.Addr().(*net.TCPAddr).Port

	dir, unhold, err := sandbox.MkdirHeld("", sandbox.NetProbePrefix)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer unhold()
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	os.Chmod(dir, 0o755)

	p := policy.Defaults()
	p.Network = policy.NetRestricted
	p.Allow = []string{fmt.Sprintf("%s:%d", probeAllowed, port), fmt.Sprintf("127.0.0.1:%d", port)}
	p.Resolve = []string{probeAllowed + "=127.0.0.1"}
	p.Terminate = "none"
	px, err := StartProxy(ctx, Options{Policy: p, AuditPath: filepath.Join(dir, "audit.jsonl"), InSandbox: in.OwnNetwork,
		EphemeralCA: true, BundlePath: filepath.Join(dir, "bundle.pem")})
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer px.Close()
	netw, env, files, err := px.Sandbox(in)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	var out bytes.Buffer
	res, err := b.Run(ctx, &sandbox.Spec{
		Policy: p, Workdir: ws, Workspace: ws, Env: env, Files: files, Network: netw, Timeout: 20 * time.Second,
		Argv:  []string{"sh", "-c", fmt.Sprintf("exec %s %s %s %d %s %s", in.Cordon, NetProbeCommand, probeAllowed, port, probeDenied, in.ProxyHost)},
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out,
	})
	switch {
	case err != nil:
		return fmt.Errorf("the probe box did not run: %w", err)
	case res.ExitCode != 0:
		return fmt.Errorf("inside the probe box: %s", strings.TrimSpace(out.String()))
	}
	return nil
}

// NetProbe runs inside the probe box: name must resolve to a fake address
// and reach the stub through the proxy on port; denied must not resolve;
// the stub must not be reachable directly at the gateway (where the proxy
// listens).
func NetProbe(args []string) error {
	if len(args) != 4 {
		return errors.New("usage: __netprobe NAME PORT DENIED GATEWAY")
	}
	name, denied := args[0], args[2]
	gateway, err := netip.ParseAddr(args[3])
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	port, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", name)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("an allowed name did not resolve through cordon's resolver: %v", err)
	}
	if !fakedns.DefaultRange.Contains(addrs[0]) {
		return fmt.Errorf("an allowed name resolved to %s, not to one of cordon's addresses: DNS is not captured", addrs[0])
	}
	if got := fetch(ctx, netip.AddrPortFrom(addrs[0], uint16(port)), name); got != probeReply {
		return fmt.Errorf("an allowed name did not connect through the proxy (got %q)", got)
	}
	if _, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", denied); err == nil {
		return errors.New("a denied name resolved: DNS is not cordon's")
	}
	if got := fetch(ctx, netip.AddrPortFrom(gateway, uint16(port)), name); got == probeReply {
		return errors.New("a direct connection to the gateway reached the stub: the nftables policy is not in force")
	}
	return nil
}

// fetch sends one HTTP request and returns the body, or the error text.
func fetch(ctx context.Context, addr netip.AddrPort, host string) string {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s:%d\r\n\r\n", host, addr.Port())
	b, _ := io.ReadAll(io.LimitReader(c, 4096))
	if _, body, ok := strings.Cut(string(b), "\r\n\r\n"); ok {
		return body
	}
	return string(b)
}
