// Package session wires one cordon session together: the audit log, the
// compiled policy, the guarded dialer, TLS termination and credentials
// around an egress proxy. Both `cordon proxy` and `cordon run` start their
// proxy here, so the two cannot drift apart.
package session

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/egress"
	"github.com/cordon-sandbox/cordon/egress/fakedns"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/tlsterm"
)

// Options configure a proxy session.
type Options struct {
	Policy *policy.Policy
	// Listen is the proxy's address; empty means 127.0.0.1:0.
	Listen string
	// AuditPath is the JSONL log; empty means audit.DefaultPath().
	AuditPath string
	// Audit, if set, is an open log to share (cordon run's session); the
	// proxy writes to it and leaves closing it to the caller.
	Audit *audit.Writer
	// InSandbox serves a sandbox that has a network of its own (Linux):
	// the proxy listens on nothing of the host's, and it and the fake-IP
	// resolver serve only the sockets that network hands over
	// (Network.Serve from Proxy.Sandbox). The proxy maps the resolver's
	// addresses back to names.
	InSandbox bool
	// Resolver replaces the system resolver (tests).
	Resolver egress.Resolver
	// CADir holds the persistent CA; empty means certs.DefaultDir().
	CADir string
	// EphemeralCA uses a CA that lives only for this session.
	EphemeralCA bool
	// Credentials names the configured credentials this session uses.
	Credentials []string
	// Creds are those credentials already loaded (cordon run loads them
	// first, to mask its refusals); nil loads them here.
	Creds *credinject.Set
	// Log receives the problems the proxy meets that have no client to
	// go to (a spent audit budget, a failed audit write), a line each;
	// nil means stderr.
	Log io.Writer
	// BundlePath is where the session's trust bundle is written; empty
	// means a file in a fresh temporary directory, or, InSandbox, no file:
	// the sandbox is given the bundle's bytes (Proxy.Sandbox).
	BundlePath string
}

// Proxy is a running egress proxy.
type Proxy struct {
	// Addr is where it listens on the host; invalid for a proxy that
	// serves its sandbox's network only (Options.InSandbox).
	Addr  netip.AddrPort
	Token string
	Audit *audit.Writer
	// Rules is the effective allowlist.
	Rules *policy.Rules
	// Bundle is the trust bundle's file (system roots, extra CAs,
	// cordon's CA); empty when no file was written (Options.BundlePath).
	Bundle string
	// CA is the certificate authority leaves are minted from.
	CA *certs.CA
	// Creds are the session's credentials; Creds.Env() holds placeholders.
	Creds *credinject.Set
	// DNS is the fake-IP resolver of a proxy that serves its sandbox's
	// network (Options.InSandbox).
	DNS *fakedns.Resolver

	// bundle is what Bundle holds.
	bundle []byte
	// tmpDir holds a bundle this session created; removed on Close,
	// then let go (unhold: it is held, sandbox.HoldDir, until then).
	tmpDir   string
	unhold   func()
	ownAudit bool
	srv      *egress.Server
	ctx      context.Context
	cancel   context.CancelFunc
	serving  sync.WaitGroup
	errMu    sync.Mutex
	err      error // the first serving error
}

// StartProxy opens the audit log, compiles the policy, listens and serves.
// Any failure is returned before the proxy accepts a single client.
func StartProxy(ctx context.Context, o Options) (*Proxy, error) {
	p := o.Policy
	// The upstream roots take longest to read (every file $SSL_CERT_DIR
	// names, 30 ms here): the first upstream handshake reads them, not
	// the start of every session. A bad extra CA file is found at once:
	// the trust bundle reads it too.
	roots := sync.OnceValues(func() (*x509.CertPool, error) { return certs.UpstreamPool(p.ExtraCA) })
	creds, err := o.Creds, error(nil)
	if creds == nil {
		if creds, err = credinject.Load(p.Credentials, o.Credentials, credinject.Options{}); err != nil {
			return nil, err
		}
	}
	allow, err := p.EffectiveAllow(o.Credentials)
	if err != nil {
		return nil, err
	}
	rules, err := policy.Compile(allow, p.Deny)
	if err != nil {
		return nil, err
	}
	static, err := parseResolve(p.Resolve)
	if err != nil {
		return nil, err
	}
	aw, ownAudit := o.Audit, false
	if aw == nil {
		path := o.AuditPath
		if path == "" {
			if path, err = audit.DefaultPath(); err != nil {
				return nil, err
			}
		}
		if aw, err = audit.Open(path, audit.NewSessionID()); err != nil {
			return nil, err
		}
		aw.SetBudget(p.Limits.AuditBudget)
		ownAudit = true
	}
	if len(creds.Names()) > 0 {
		aw.SetRedact(creds.Scrub)
	}
	closeAudit := func() {
		if ownAudit {
			aw.Close()
		}
	}
	var ln net.Listener
	var self netip.AddrPort
	if !o.InSandbox {
		listen := o.Listen
		if listen == "" {
			listen = "127.0.0.1:0"
		}
		if ln, err = net.Listen(listenNetwork(listen), listen); err != nil {
			closeAudit()
			return nil, fmt.Errorf("listen on %s: %w (choose another address with --listen 127.0.0.1:PORT)", listen, err)
		}
		self, _ = netip.ParseAddrPort(ln.Addr().String())
	}
	closeListener := func() {
		if ln != nil {
			ln.Close()
		}
	}
	dialer := &egress.Dialer{
		Rules:       rules,
		Resolver:    o.Resolver,
		DenyPrivate: p.DenyPrivate,
		Host:        &egress.HostAddrs{},
		Static:      static,
	}
	if ln != nil {
		dialer.Self = []netip.AddrPort{self}
	}
	// The session writes its trust bundle into a directory of its own
	// unless told where; that directory goes with the session. A sandbox
	// with a network of its own is given the bytes, so no file is needed.
	bundle, tmpDir, unhold := o.BundlePath, "", func() {}
	if bundle == "" && !o.InSandbox {
		if tmpDir, unhold, err = bundleDir(); err != nil {
			closeListener()
			closeAudit()
			return nil, fmt.Errorf("trust bundle: %w", err)
		}
		os.Chmod(tmpDir, 0o755)
		bundle = filepath.Join(tmpDir, "ca-bundle.pem")
	}
	var dns *fakedns.Resolver
	fail := func(err error) (*Proxy, error) {
		closeListener()
		if tmpDir != "" {
			os.RemoveAll(tmpDir)
			unhold()
		}
		if dns != nil {
			dns.Close()
		}
		closeAudit()
		return nil, err
	}
	var logw io.Writer = os.Stderr
	if o.Log != nil {
		logw = o.Log
	}
	errLog := log.New(logw, "", 0)
	var fakeName func(netip.Addr) (string, bool)
	if o.InSandbox {
		if dns, err = fakedns.New(fakedns.Config{Rules: rules, Audit: aw, ErrorLog: errLog}); err != nil {
			return fail(err)
		}
		fakeName = dns.NameFor
	}
	ca, err := loadCA(o)
	if err != nil {
		return fail(err)
	}
	bundleData, err := trustBundle(o, bundle, ca)
	if err != nil {
		return fail(err)
	}
	tt, err := tlsterm.New(tlsterm.Config{
		Leaves: certs.NewLeafCache(ca, certs.DefaultLeafCacheSize), Roots: roots, Audit: aw, Creds: creds,
		ErrorLog: errLog,
	})
	if err != nil {
		return fail(err)
	}
	terminate, err := terminatePredicate(p)
	if err != nil {
		return fail(err)
	}
	token := egress.NewToken()
	srv, err := egress.New(egress.Config{
		Rules: rules, Dialer: dialer, Audit: aw, Token: token,
		TLS: tt, Terminate: terminate, Creds: creds,
		FakeRange: fakedns.DefaultRange, FakeName: fakeName,
		OwnUserOnly: ln != nil,
		ErrorLog:    errLog,
	})
	if err != nil {
		return fail(err)
	}
	where := "proxy started"
	if o.InSandbox {
		where += " for the sandbox's own network"
	}
	addr := ""
	if ln != nil {
		addr = self.String()
	}
	if err := aw.Write(audit.Record{Type: audit.TypeSession,
		Addr: addr, Detail: where + "; allow: " + strings.Join(rules.Names(), " ")}); err != nil {
		return fail(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	px := &Proxy{tmpDir: tmpDir, unhold: unhold, Addr: self, Token: token, Audit: aw, Rules: rules, Bundle: bundle, bundle: bundleData, CA: ca, Creds: creds, DNS: dns, ownAudit: ownAudit, srv: srv, ctx: sctx, cancel: cancel}
	if ln != nil {
		px.serve(func() error { return srv.Serve(sctx, ln) })
	}
	return px, nil
}

// serve runs fn until the session ends, keeping its error for Close.
func (p *Proxy) serve(fn func() error) {
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		if err := fn(); err != nil {
			p.errMu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.errMu.Unlock()
		}
	}()
}

// serveSandbox serves a sandbox's own network: the proxy, the transparent
// listener and the resolver, on the sockets made inside it.
func (p *Proxy) serveSandbox(sk sandbox.Sockets) error {
	if err := p.DNS.Serve(p.ctx, sk.DNS, sk.DNSTCP); err != nil {
		return err
	}
	p.serve(func() error { return p.srv.Serve(p.ctx, sk.Proxy) })
	p.serve(func() error { return p.srv.ServeTransparent(p.ctx, sk.Transparent, sk.Dest, sk.Own) })
	return nil
}

// URL is the proxy URL with its token, as a client on this host uses it.
func (p *Proxy) URL() string {
	return p.URLFor(p.Addr.String())
}

// URLFor is the proxy URL as seen from another address (inside a sandbox).
func (p *Proxy) URLFor(hostport string) string {
	u := url.URL{Scheme: "http", User: url.UserPassword("cordon", p.Token), Host: hostport}
	return u.String()
}

// Env is the environment a proxy-aware client needs, as NAME=value: the
// proxy variables, those that point every ecosystem at the bundle, and the
// credentials' placeholders.
func (p *Proxy) Env(proxyURL string) []string {
	env := append(certs.BundleEnv(p.Bundle), p.Creds.Env()...)
	return append(env, p.proxyEnv(proxyURL)...)
}

// proxyEnv is the proxy variables, both cases, and an empty NO_PROXY.
func (p *Proxy) proxyEnv(proxyURL string) []string {
	var env []string
	for _, name := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"} {
		env = append(env, name+"="+proxyURL, strings.ToLower(name)+"="+proxyURL)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// Close stops the proxy and closes the audit log.
func (p *Proxy) Close() error {
	p.cancel()
	p.serving.Wait()
	err := p.err
	if p.tmpDir != "" {
		os.RemoveAll(p.tmpDir)
		p.unhold()
	}
	if p.DNS != nil {
		p.DNS.Close()
	}
	if p.ownAudit {
		if cerr := p.Audit.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// parseResolve reads "name=addr" pins.
func parseResolve(entries []string) (map[string][]netip.Addr, error) {
	out := map[string][]netip.Addr{}
	for _, e := range entries {
		name, addr, err := policy.ParseResolve(e)
		if err != nil {
			return nil, err
		}
		out[name] = append(out[name], addr.Unmap())
	}
	return out, nil
}

// loadCA loads (or creates) the session's CA, or makes an ephemeral one.
func loadCA(o Options) (*certs.CA, error) {
	if o.EphemeralCA {
		return certs.NewEphemeral()
	}
	dir := o.CADir
	if dir == "" {
		var err error
		if dir, err = certs.DefaultDir(); err != nil {
			return nil, err
		}
	}
	return certs.LoadOrCreate(dir)
}

// bundleDir makes a session's own directory for its trust bundle: in
// $TMPDIR where no other user can make names (macOS gives each user
// one), else in the sessions directory in cordon's cache directory. The
// bundle's path outlives the session in its clients' environment (eval
// "$(cordon proxy)" sets it in a shell), and in a directory shared with
// other users, as /tmp is, one of them could make that path anew once
// the session has removed it, with a CA of their own in it for those
// clients to trust.
//
// The directory is held (sandbox.HoldDir) for the session's life: one a
// killed session left is removed, once stale, by the sweep (on a
// goroutine of its own) that each new one starts, which sweeps the
// temporary directory too.
func bundleDir() (dir string, release func(), err error) {
	parent, err := bundleParent()
	if err != nil {
		return "", nil, err
	}
	if dir, release, err = sandbox.MkdirHeld(parent, bundlePrefix); err != nil {
		return "", nil, err
	}
	go func() {
		sandbox.SweepStale(parent, bundlePrefix)
		sandbox.SweepTemp()
	}()
	return dir, release, nil
}

// bundlePrefix begins the name of a session's bundle directory: a new
// one, as sandbox.ScratchPrefix is (cordon-bundle- before they were
// held).
const bundlePrefix = "cordon-session-"

// bundleParent is where bundleDir makes the directory.
func bundleParent() (string, error) {
	tmp := os.TempDir()
	if fi, err := os.Stat(tmp); err == nil && ownPrivateDir(fi) {
		return tmp, nil
	}
	c := sandbox.CacheDir()
	if c == "" {
		return "", fmt.Errorf("the temporary directory %s is shared with other users, and there is no cache directory of yours to make the bundle in instead: set $HOME or $XDG_CACHE_HOME", tmp)
	}
	d := filepath.Join(c, "sessions")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	if fi, err := os.Stat(d); err != nil || !ownPrivateDir(fi) {
		return "", fmt.Errorf("%s is not a directory of yours that only you can write: remove it, cordon makes it anew", d)
	}
	return d, nil
}

// ownPrivateDir says whether fi is a directory of this user's in which
// no one else can make or remove names.
func ownPrivateDir(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.IsDir() && fi.Mode().Perm()&0o022 == 0 && int(st.Uid) == os.Geteuid()
}

// trustBundle returns the session's trust bundle, written at path unless
// path is empty. A lasting CA's bundle is kept between sessions; an
// ephemeral CA's would never be asked for again.
func trustBundle(o Options, path string, ca *certs.CA) ([]byte, error) {
	cacheDir := ""
	if d := sandbox.CacheDir(); d != "" && !o.EphemeralCA {
		cacheDir = filepath.Join(d, "bundles")
	}
	if path == "" {
		return certs.Bundle(ca, o.Policy.ExtraCA, cacheDir)
	}
	return certs.WriteBundle(path, ca, o.Policy.ExtraCA, cacheDir)
}

// terminatePredicate says which allowed tunnels are terminated: all but
// the exclude patterns, or none with terminate: none.
func terminatePredicate(p *policy.Policy) (func(string, int) bool, error) {
	switch p.Terminate {
	case "none":
		return func(string, int) bool { return false }, nil
	case "", "all":
	default:
		return nil, fmt.Errorf("terminate: %q is not all or none", p.Terminate)
	}
	excl, err := policy.Compile(p.Exclude, nil)
	if err != nil {
		return nil, fmt.Errorf("exclude: %w", err)
	}
	return func(host string, port int) bool {
		return !excl.DecideNormalized(host, port).Allow
	}, nil
}

// listenNetwork is the network to listen on addr with: tcp4 for an IPv4
// address (0.0.0.0 among them, and one written IPv4-mapped), tcp6 for an
// IPv6 one, tcp for no address (all of the machine's, both families).
// Go listens on 0.0.0.0 with "tcp" on every IPv6 address as well (a
// dual-stack socket), which --listen 0.0.0.0:PORT did not ask for.
func listenNetwork(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp"
	}
	a, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "tcp"
	case a.Unmap().Is4():
		return "tcp4"
	}
	return "tcp6"
}
