package session

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// Inside says where a backend's sandbox finds cordon's pieces.
type Inside struct {
	// ProxyHost and ProxyPort are the proxy's address as the sandbox
	// reaches it; ProxyPort 0 means the port it listens on on the host.
	ProxyHost string
	ProxyPort int
	// OwnNetwork says the sandbox has a network of its own, whose sockets
	// the session serves (Linux); the session must then be started with
	// Options.InSandbox. Without it the sandbox reaches the proxy on the
	// host's loopback (macOS).
	OwnNetwork bool
	// Bundle is the path the trust bundle is placed at inside; empty
	// means the sandbox reads it where the session wrote it.
	Bundle string
	// Cordon is cordon's own binary inside (for `cordon connect`).
	Cordon string
	// SystemBundles are the system CA files to overlay with the bundle, so
	// clients that read no variable still trust cordon's CA.
	SystemBundles []string
	// Resolver is the nameserver written to /etc/resolv.conf (any address:
	// every DNS query is redirected to cordon's resolver); empty means the
	// backend captures no DNS, and no resolver is needed.
	Resolver string
}

// Sandbox is what a restricted sandbox needs from this session: the
// network for the backend, the environment that points proxy-aware clients
// at the proxy and every client at the trust bundle, and the files to
// place (bundle, resolv.conf, hosts).
func (p *Proxy) Sandbox(in Inside) (*sandbox.Network, []string, map[string][]byte, error) {
	switch {
	case in.OwnNetwork != (p.DNS != nil):
		return nil, nil, nil, fmt.Errorf("session: a sandbox with a network of its own, and only such a sandbox, needs a session started with InSandbox")
	case in.Resolver != "" && !in.OwnNetwork:
		return nil, nil, nil, fmt.Errorf("session: only a sandbox with a network of its own can capture DNS")
	}
	bundle := p.bundle
	port := in.ProxyPort
	if port == 0 {
		port = int(p.Addr.Port())
	}
	proxyURL := p.URLFor(net.JoinHostPort(in.ProxyHost, strconv.Itoa(port)))
	netw := &sandbox.Network{ProxyURL: proxyURL}
	if in.OwnNetwork {
		netw.Serve = p.serveSandbox
	} else {
		netw.ProxyPort = int(p.Addr.Port())
	}
	files := map[string][]byte{}
	bundlePath := p.Bundle
	if in.Bundle != "" {
		bundlePath, files[in.Bundle] = in.Bundle, bundle
	}
	if bundlePath == "" {
		return nil, nil, nil, fmt.Errorf("session: the sandbox needs its trust bundle placed (Inside.Bundle): this session wrote no file")
	}
	if in.Resolver != "" {
		files["/etc/resolv.conf"] = []byte("nameserver " + in.Resolver + "\n")
		files["/etc/hosts"] = []byte("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	}
	for _, f := range in.SystemBundles {
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
			files[f] = bundle
		}
	}
	env := append(p.proxyEnv(proxyURL), certs.BundleEnv(bundlePath)...)
	env = append(env, p.Creds.Env()...)
	env = append(env, fmt.Sprintf("GIT_SSH_COMMAND=ssh -o ProxyCommand='%s connect %%h %%p'", in.Cordon))
	return netw, env, files, nil
}
