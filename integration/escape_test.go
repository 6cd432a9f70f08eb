//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// The escape corpus: every attack cordon must stop, kept as data in
// integration/escape/*.yaml (one file per class of attack), and the runner
// that plays them. Attacks that share a policy share one `cordon run` or
// one `cordon proxy`. An attack fails when it got through by any measure:
// it printed escapeMarker or a string it must never see, a secret turned
// up in its output or its loot, the test host or a host-loopback canary
// received its traffic, the proxy token reached the test host, or a file
// appeared on the host; and it fails when it did not run as written: an
// expected failure marker or audit line is missing.

// escapeMarker is what an attack prints only when it got through.
const escapeMarker = "ESCAPED"

// escapeFile is one catalogue file: one class of attacks.
type escapeFile struct {
	Class string `yaml:"class"`
	// Prelude is shell put before each attack's command in this file.
	Prelude  string         `yaml:"prelude"`
	Defaults escapePolicy   `yaml:"defaults"`
	Attacks  []escapeAttack `yaml:"attacks"`
}

// escapePolicy is the part of an attack that decides which cordon it runs
// under; attacks whose policies are equal share one.
type escapePolicy struct {
	// Via is "run" (a shell command inside `cordon run --net restricted`)
	// or "proxy" (a request to `cordon proxy` from the host).
	Via string `yaml:"via"`
	// Allow is the allowlist (--allow entries).
	Allow []string `yaml:"allow"`
	// Args are further cordon flags.
	Args []string `yaml:"args"`
	// Env is cordon's own environment (NAME=VALUE), never the sandbox's.
	Env []string `yaml:"env"`
	// Config is the content of a --config file.
	Config string `yaml:"config"`
	// Setup is shell run on the host, as the test user, before cordon.
	Setup string `yaml:"setup"`
	// Outer makes the workspace {outer}/ws, a directory inside a fresh
	// one, {outer}, that setup may make a larger repository (a monorepo
	// whose frontend/ is the workspace); setup then gives {ws} a
	// .cordon.yaml, or cordon takes {outer} for the workspace.
	Outer bool `yaml:"outer"`
}

// escapeAttack is one catalogue entry.
type escapeAttack struct {
	Name   string `yaml:"name"`
	Source string `yaml:"source"`

	escapePolicy `yaml:",inline"`

	// Cmd is shell: inside the sandbox (run) or on the host with the
	// proxy's exported environment (proxy).
	Cmd string `yaml:"cmd"`
	// Raw is a hand-written exchange with the proxy (proxy only).
	Raw *rawExchange `yaml:"raw"`
	// After is shell run on the host, as the test user, once the run has
	// ended and before the oracles are checked (run only): what the user
	// does next, such as a git status in the workspace, whose effects
	// host_absent then looks for. Its exit status does not matter.
	After string `yaml:"after"`

	Expect escapeExpect `yaml:"expect"`

	class, prelude, file string
}

// escapeExpect is how an attack must end.
type escapeExpect struct {
	// Blocked is true for an attack; false for a spelling that must
	// still reach its allowed host (a control).
	Blocked *bool `yaml:"blocked"`
	// Output lists strings the attack's output must contain: the failure
	// marker, or proof that the attempt really ran.
	Output []string `yaml:"output"`
	// Never lists strings the output must not contain.
	Never []string `yaml:"never"`
	// Audit lists records that must be in the audit log, or is "none".
	Audit auditSpec `yaml:"audit"`
	// Reason says, with `audit: none`, why nothing can log the attempt.
	Reason string `yaml:"reason"`
	// Exit is cordon's exit status (run; default 0).
	Exit *int `yaml:"exit"`
	// Gone is an argv (space separated) no process may have once the
	// run is over (run).
	Gone string `yaml:"gone"`
	// HostAbsent lists host paths that must not exist after the run (run).
	HostAbsent []string `yaml:"host_absent"`
}

// auditSpec is a list of wanted audit records, or "none".
type auditSpec struct {
	None    bool
	Records []auditWant
}

func (a *auditSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "none" {
			return fmt.Errorf("line %d: audit is a list of records or the word none, not %q", n.Line, n.Value)
		}
		a.None = true
		return nil
	}
	return n.Decode(&a.Records)
}

// auditWant matches an audit record on every field it sets.
type auditWant struct {
	Type       string `yaml:"type"`
	Kind       string `yaml:"kind"`
	Decision   string `yaml:"decision"`
	Reason     string `yaml:"reason"`
	Host       string `yaml:"host"`
	Port       string `yaml:"port"`
	Credential string `yaml:"credential"`
	// Path is how the record's path begins (a set-aside name ends in a
	// random suffix).
	Path string `yaml:"path"`
}

func (w auditWant) matches(r audit.Record) bool {
	for _, f := range [][2]string{
		{w.Type, string(r.Type)}, {w.Kind, string(r.Kind)}, {w.Decision, r.Decision}, {w.Reason, r.Reason},
		{w.Host, r.Host}, {w.Port, strconv.Itoa(r.Port)}, {w.Credential, r.Credential},
	} {
		if f[0] != "" && f[0] != f[1] {
			return false
		}
	}
	return strings.HasPrefix(r.Path, w.Path)
}

func (w auditWant) expand(x *strings.Replacer) auditWant {
	return auditWant{x.Replace(w.Type), x.Replace(w.Kind), x.Replace(w.Decision), x.Replace(w.Reason),
		x.Replace(w.Host), x.Replace(w.Port), x.Replace(w.Credential), x.Replace(w.Path)}
}

// rawExchange is one hand-written conversation with the proxy: an
// optional CONNECT, an optional TLS session over it, then requests sent
// one by one, each followed by reading one response. Its transcript
// ("CONNECT 200", "TLS ok h2", "HTTP 421 authority_mismatch", "read: ...")
// is the attack's output.
type rawExchange struct {
	// Connect is the CONNECT target; empty sends Send to the proxy port.
	Connect string `yaml:"connect"`
	// HTTP10 sends the CONNECT as HTTP/1.0 without a Host header, so the
	// target reaches cordon exactly as written (net/http refuses a Host
	// header that is not ASCII).
	HTTP10 bool `yaml:"http10"`
	// TLS is the SNI of a TLS session over the tunnel, verified against
	// the proxy's bundle.
	TLS  string   `yaml:"tls"`
	ALPN []string `yaml:"alpn"`
	// Lead is written into the tunnel as soon as it is open, before any
	// TLS, and Pause is waited after it (a Go duration).
	Lead  string `yaml:"lead"`
	Pause string `yaml:"pause"`
	// Send are raw requests; {auth} is the proxy's Basic credentials.
	Send []string `yaml:"send"`
}

var (
	attackName     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	escapeUDPSeen  sync.Map // payload -> struct{}: what reached the test host's UDP echo
	originUDPOnce  sync.Once
	originUDPPort  int
	originUDPError error
)

// loadEscapeCorpus reads and checks every file of the catalogue.
func loadEscapeCorpus(t *testing.T) []*escapeAttack {
	t.Helper()
	dir := filepath.Join(repoRoot(), "integration", "escape")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogue files in %s (%v)", dir, err)
	}
	var all []*escapeAttack
	names := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		var ef escapeFile
		if err := dec.Decode(&ef); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if ef.Class == "" || len(ef.Attacks) == 0 {
			t.Fatalf("%s: a catalogue file needs a class and at least one attack", f)
		}
		for i := range ef.Attacks {
			a := &ef.Attacks[i]
			a.class, a.prelude, a.file = ef.Class, ef.Prelude, filepath.Base(f)
			a.escapePolicy = a.escapePolicy.over(ef.Defaults)
			if err := a.check(); err != nil {
				t.Fatalf("%s: attack %q: %v", f, a.Name, err)
			}
			if prev, dup := names[a.Name]; dup {
				t.Fatalf("%s: attack %q is also in %s; names must be unique", f, a.Name, prev)
			}
			names[a.Name] = a.file
			all = append(all, a)
		}
	}
	return all
}

// over fills the fields p leaves empty from the file's defaults.
func (p escapePolicy) over(d escapePolicy) escapePolicy {
	if p.Via == "" {
		p.Via = d.Via
	}
	if p.Allow == nil {
		p.Allow = d.Allow
	}
	if p.Args == nil {
		p.Args = d.Args
	}
	if p.Env == nil {
		p.Env = d.Env
	}
	if p.Config == "" {
		p.Config = d.Config
	}
	if p.Setup == "" {
		p.Setup = d.Setup
	}
	return p
}

// key identifies the cordon an attack runs under.
func (p escapePolicy) key() string {
	return strings.Join([]string{p.Via, strings.Join(p.Allow, "\x01"), strings.Join(p.Args, "\x01"),
		strings.Join(p.Env, "\x01"), p.Config, p.Setup, strconv.FormatBool(p.Outer)}, "\x00")
}

func (a *escapeAttack) check() error {
	e := a.Expect
	switch {
	case !attackName.MatchString(a.Name):
		return errors.New("name must be lower-case letters, digits and dashes")
	case a.Source == "":
		return errors.New("source (the bug class it comes from) is missing")
	case a.Via != "run" && a.Via != "proxy":
		return fmt.Errorf("via is %q; use run or proxy", a.Via)
	case (a.Cmd == "") == (a.Raw == nil):
		return errors.New("give exactly one of cmd and raw")
	case a.Raw != nil && a.Via != "proxy":
		return errors.New("raw exchanges are for via: proxy")
	case e.Blocked == nil:
		return errors.New("expect.blocked is missing")
	case *e.Blocked && !e.Audit.None && len(e.Audit.Records) == 0:
		return errors.New("a blocked attack lists the audit records it leaves, or says `audit: none` with a reason")
	case e.Audit.None && e.Reason == "":
		return errors.New("`audit: none` needs a reason: why can nothing log this attempt?")
	case a.Via == "proxy" && (e.Exit != nil || e.Gone != "" || len(e.HostAbsent) > 0 || a.After != ""):
		return errors.New("exit, gone, host_absent and after are for via: run")
	case strings.Contains(a.Cmd, "{real_key}") || strings.Contains(a.Setup, "{real_key}"):
		return errors.New("{real_key} is for cordon's environment only: the attacker does not know it")
	}
	return nil
}

// escapeGroup is the attacks sharing one cordon, and that cordon's state.
type escapeGroup struct {
	escapePolicy
	attacks []*escapeAttack
	unique  string // a sleep duration no other process uses
	scratch string // a test-user directory outside the workspace
	canary  *tcpCanary
	udp     *udpCanary
	// ws is the workspace (run) or the attacks' scratch directory (proxy).
	ws string
	// outer is the directory holding the workspace, with Outer.
	outer string
	base  map[string]string // placeholders shared by every group
	leaks map[string]bool   // files the group left that hold a secret
	// run
	audit    string
	res      result
	sections map[string]string
	ranErr   error
	// proxy
	proxy *proxyProc
}

// escapeEnv is the corpus-wide fixture: the test user's real home and the
// secrets no attack may ever get hold of.
type escapeEnv struct {
	realHome, hostSecret string
	secrets              []string
}

func TestEscapeCorpus(t *testing.T) {
	attacks := loadEscapeCorpus(t)
	// CORDON_ESCAPE_ONLY (names, comma-separated) plays only those
	// attacks, for working on one without playing the whole corpus.
	if only := os.Getenv("CORDON_ESCAPE_ONLY"); only != "" {
		names := strings.Split(only, ",")
		attacks = slices.DeleteFunc(attacks, func(a *escapeAttack) bool { return !slices.Contains(names, a.Name) })
		if len(attacks) == 0 {
			t.Fatalf("CORDON_ESCAPE_ONLY=%s names no attack of the corpus", only)
		}
	}
	o := testOrigin(t)
	env := prepareEscapeEnv(t)
	udpPort, err := originUDPEcho()
	if err != nil {
		t.Fatalf("test host UDP echo: %v", err)
	}

	var groups []*escapeGroup
	byKey := map[string]*escapeGroup{}
	for _, a := range attacks {
		g := byKey[a.key()]
		if g == nil {
			g = &escapeGroup{escapePolicy: a.escapePolicy, unique: uniqueSleep(), scratch: userDir(t, "cordon-it-scratch-"),
				canary: newTCPCanary(t), udp: newUDPCanary(t)}
			byKey[a.key()] = g
			groups = append(groups, g)
		}
		g.attacks = append(g.attacks, a)
	}
	ip := netip.MustParseAddr(originAddr).As4()
	n := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	base := map[string]string{
		"{origin}": originName, "{origin_ip}": originAddr, "{origin_ca}": o.caFile,
		"{origin_ip_int}": strconv.FormatUint(uint64(n), 10), "{origin_ip_hex}": fmt.Sprintf("0x%08x", n),
		"{origin_ip_octal}": fmt.Sprintf("0%o.0%o.0%o.0%o", ip[0], ip[1], ip[2], ip[3]),
		"{origin_ptr}":      fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa", ip[3], ip[2], ip[1], ip[0]),
		"{origin_udp_port}": strconv.Itoa(udpPort), "{real_home}": env.realHome, "{real_key}": realKey,
		"{own_ip}": ownInterfaceAddr(t).String(),
	}
	runs := 0
	for _, g := range groups {
		g.placeholders(base)
		if g.Via == "run" {
			runs++
		} else {
			g.startProxy(t, env)
		}
	}
	// The sandboxed runs are independent: play them two at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, g := range groups {
		if g.Via != "run" {
			continue
		}
		cmd := g.prepareRun(t, env)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			g.res, g.ranErr = runBounded(cmd, 4*time.Minute)
			g.sections = splitSections(g.res.stdout)
		}()
	}
	wg.Wait()

	passed, failed := 0, 0
	for _, g := range groups {
		for _, a := range g.attacks {
			ok := t.Run(a.Name, func(t *testing.T) { g.judge(t, a, env) })
			if ok {
				passed++
			} else {
				failed++
			}
		}
	}
	fmt.Printf("escape corpus: %d passed, %d failed\n", passed, failed)
	t.Logf("%d attacks in %d groups (%d sandboxed runs, %d proxies)", len(attacks), len(groups), runs, len(groups)-runs)
}

// prepareEscapeEnv puts a fake private key in the test user's real home
// (unless one is there) and picks the secrets no attack may see.
func prepareEscapeEnv(t *testing.T) escapeEnv {
	t.Helper()
	uid, gid, home := testUser(t)
	env := escapeEnv{realHome: home, hostSecret: "host-secret-" + randomHex(16)}
	sshDir := filepath.Join(home, ".ssh")
	key := filepath.Join(sshDir, "id_rsa")
	content, err := os.ReadFile(key)
	if errors.Is(err, fs.ErrNotExist) {
		_, dirErr := os.Stat(sshDir)
		content = []byte("-----BEGIN OPENSSH PRIVATE KEY-----\ncordon-escape-fake-key-" + randomHex(24) + "\n-----END OPENSSH PRIVATE KEY-----\n")
		if err := os.MkdirAll(sshDir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(sshDir, int(uid), int(gid))
		if err := os.WriteFile(key, content, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(key, int(uid), int(gid))
		t.Cleanup(func() {
			os.Remove(key)
			if errors.Is(dirErr, fs.ErrNotExist) {
				os.Remove(sshDir)
			}
		})
	} else if err != nil {
		t.Fatal(err)
	}
	env.secrets = []string{realKey, base64.StdEncoding.EncodeToString([]byte(realKey)), env.hostSecret,
		strings.TrimSpace(string(content))}
	return env
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// placeholders expands the group's policy.
func (g *escapeGroup) placeholders(base map[string]string) {
	x := g.replacer(base, nil)
	for _, list := range []*[]string{&g.Allow, &g.Args, &g.Env} {
		out := make([]string, len(*list))
		for i, s := range *list {
			out[i] = x.Replace(s)
		}
		*list = out
	}
	g.Config = x.Replace(g.Config)
	g.base = base
}

// replacer maps the placeholders for the group and, if a is set, the attack.
func (g *escapeGroup) replacer(base map[string]string, a *escapeAttack) *strings.Replacer {
	var pairs []string
	for k, v := range base {
		pairs = append(pairs, k, v)
	}
	pairs = append(pairs, "{canary_port}", strconv.Itoa(g.canary.port), "{udp_canary_port}", strconv.Itoa(g.udp.port),
		"{unique}", g.unique, "{scratch}", g.scratch, "{ws}", g.ws, "{outer}", g.outer, "{audit}", g.audit)
	if g.proxy != nil {
		u, _ := url.Parse(g.proxy.URL())
		pairs = append(pairs, "{proxy_addr}", u.Host, "{proxy_port}", u.Port())
	}
	if a != nil {
		pairs = append(pairs, "{name}", a.Name, "{path}", "/escape/"+a.Name, "{ok}", "/ok/"+a.Name, "{loot}", g.loot(a))
	}
	return strings.NewReplacer(pairs...)
}

// loot is where an attack keeps what it copied; it is searched for secrets.
func (g *escapeGroup) loot(a *escapeAttack) string {
	if g.Via == "run" {
		return filepath.Join(g.ws, ".escape", "loot", a.Name)
	}
	return filepath.Join(g.ws, a.Name)
}

// script is an attack's shell: the common prelude, its file's, its command.
func (g *escapeGroup) script(a *escapeAttack) string {
	x := g.replacer(g.base, a)
	return x.Replace("set -u\nLOOT={loot}\nmkdir -p \"$LOOT\"\n") + x.Replace(a.prelude) + "\n" + x.Replace(a.Cmd) + "\n"
}

// commonArgs are the flags every group gets, then its own.
func (g *escapeGroup) commonArgs(o *origin) []string {
	args := []string{resolveOrigin, "--extra-ca", o.caFile}
	for _, a := range g.Allow {
		args = append(args, "--allow", a)
	}
	if g.Config != "" {
		cfg := filepath.Join(g.scratch, "config.yaml")
		os.WriteFile(cfg, []byte(g.Config), 0o644)
		args = append(args, "--config", cfg)
	}
	return append(args, g.Args...)
}

// setup runs the group's host-side preparation as the test user.
func (g *escapeGroup) setup(t *testing.T) {
	t.Helper()
	if g.Setup == "" {
		return
	}
	out, err := run(t, 30*time.Second, asUser(t, nil, "sh", "-ec", g.replacer(g.base, nil).Replace(g.Setup)))
	if err != nil {
		t.Fatalf("setup %q: %v\n%s", g.Setup, err, out)
	}
}

func (g *escapeGroup) startProxy(t *testing.T, env escapeEnv) {
	t.Helper()
	g.ws = userDir(t, "cordon-it-loot-")
	g.setup(t)
	g.proxy = startProxyEnv(t, append([]string{"CORDON_ESCAPE_HOST_SECRET=" + env.hostSecret}, g.Env...), g.commonArgs(testOrigin(t))...)
}

// prepareRun writes the workspace scripts and returns the `cordon run`.
func (g *escapeGroup) prepareRun(t *testing.T, env escapeEnv) *exec.Cmd {
	t.Helper()
	g.ws = userDir(t, "cordon-it-ws-")
	uid, gid, _ := testUser(t)
	if g.Outer {
		g.outer = g.ws
		g.ws = filepath.Join(g.outer, "ws")
		os.Mkdir(g.ws, 0o755)
		os.Chown(g.ws, int(uid), int(gid))
	}
	g.audit = filepath.Join(userDir(t, "cordon-it-audit-"), "audit.jsonl")
	dir := filepath.Join(g.ws, ".escape")
	os.MkdirAll(filepath.Join(dir, "loot"), 0o755)
	os.Chown(dir, int(uid), int(gid))
	os.Chown(filepath.Join(dir, "loot"), int(uid), int(gid))
	var main strings.Builder
	main.WriteString("cd \"$(dirname \"$0\")/..\"\n")
	for _, a := range g.attacks {
		writeUserFile(t, filepath.Join(dir, a.Name+".sh"), []byte(g.script(a)))
		fmt.Fprintf(&main, "echo '@@BEGIN %[1]s'\ntimeout -k 2 40 sh .escape/%[1]s.sh </dev/null 2>&1\nprintf '\\n@@END %[1]s %%d\\n' $?\n", a.Name)
	}
	writeUserFile(t, filepath.Join(dir, "main.sh"), []byte(main.String()))
	g.setup(t)
	args := append([]string{"run", "--net", "restricted", "--audit", g.audit, "--ephemeral-ca", "--timeout", "180s"}, g.commonArgs(testOrigin(t))...)
	args = append(args, "--", "sh", filepath.Join(dir, "main.sh"))
	return cordonIn(t, g.ws, append([]string{"CORDON_ESCAPE_HOST_SECRET=" + env.hostSecret}, g.Env...), args...)
}

// runBounded runs cmd to completion within timeout, off the test
// goroutine: a command still running at the deadline is killed with its
// process group and reported.
func runBounded(cmd *exec.Cmd, timeout time.Duration) (result, error) {
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		<-done
		return result{stdout: stdout.String(), stderr: stderr.String()}, fmt.Errorf("did not finish within %s", timeout)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code, err = ee.ExitCode(), nil
	}
	return r, err
}

// splitSections cuts a run's stdout into each attack's output.
func splitSections(stdout string) map[string]string {
	out := map[string]string{}
	var name string
	var cur strings.Builder
	for _, l := range strings.SplitAfter(stdout, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(l), "@@BEGIN "); ok {
			name = n
			cur.Reset()
			out[name] = ""
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "@@END "); ok && name != "" && strings.HasPrefix(rest, name+" ") {
			out[name] = cur.String() + "@@END " + strings.TrimPrefix(rest, name+" ")
			name = ""
			continue
		}
		if name != "" {
			cur.WriteString(l)
			out[name] = cur.String()
		}
	}
	return out
}

// judge plays (proxy) or reads (run) one attack and checks every oracle.
func (g *escapeGroup) judge(t *testing.T, a *escapeAttack, env escapeEnv) {
	e := a.Expect
	x := g.replacer(g.base, a)
	var tr trace
	if g.Via == "proxy" {
		tr = g.playProxy(t, a, x)
	} else {
		tr = g.readRun(t, a)
		if a.After != "" {
			after := x.Replace(a.After)
			out, err := run(t, 30*time.Second, asUser(t, nil, "sh", "-c", after))
			t.Logf("after the run, on the host: %s (%v)\n%s", after, err, out)
		}
	}
	if got := g.breaches(t, a, x, env, tr); len(got) > 0 {
		t.Errorf("GOT THROUGH (%s, %s):\n  %s\noutput:\n%s", a.class, a.Source, strings.Join(got, "\n  "), tr.output)
	}
	for _, s := range e.Output {
		if s = x.Replace(s); !strings.Contains(tr.output, s) {
			t.Errorf("the output lacks %q, so the attempt did not run as written:\n%s", s, tr.output)
		}
	}
	if missing := missingRecords(e.Audit.Records, x, tr.records); len(missing) > 0 {
		var lines []string
		for _, r := range tr.records() {
			if r.Type == audit.TypeDecision || r.Type == audit.TypeClose || r.Type == audit.TypeInject {
				lines = append(lines, fmt.Sprintf("%s %s %s:%d %s %s %s", r.Type, r.Kind, r.Host, r.Port, r.Decision, r.Reason, r.Credential))
			}
		}
		t.Errorf("no audit record like %+v\naudit:\n  %s\noutput:\n%s", missing, strings.Join(lines, "\n  "), tr.output)
	}
	switch {
	case t.Failed():
	case !*e.Blocked:
		t.Logf("%s: still allowed (%s)", a.class, a.Source)
	case e.Audit.None:
		t.Logf("%s: refused (%s); nothing can log it: %s", a.class, a.Source, e.Reason)
	default:
		t.Logf("%s: refused (%s) and logged", a.class, a.Source)
	}
}

// trace is what one attack left: its output, the audit records it may
// have caused, and the canary hits it may have caused.
type trace struct {
	output         string
	records        func() []audit.Record
	tcpHits        int64
	udpHits        int64
	hitsAreAttacks bool // the hits are this attack's alone (played one by one)
}

// playProxy plays an attack against the group's proxy.
func (g *escapeGroup) playProxy(t *testing.T, a *escapeAttack, x *strings.Replacer) trace {
	t.Helper()
	before := len(readAuditIfAny(g.proxy.audit))
	tcp, udp := g.canary.hits.Load(), g.udp.hits.Load()
	tr := trace{output: g.play(t, a, x), hitsAreAttacks: true}
	tr.tcpHits, tr.udpHits = g.canary.hits.Load()-tcp, g.udp.hits.Load()-udp
	tr.records = func() []audit.Record {
		all := readAuditIfAny(g.proxy.audit)
		return all[min(before, len(all)):]
	}
	return tr
}

// readRun takes an attack's part of its group's run.
func (g *escapeGroup) readRun(t *testing.T, a *escapeAttack) trace {
	t.Helper()
	if g.ranErr != nil {
		t.Fatalf("cordon run: %v\nstderr:\n%s", g.ranErr, g.res.stderr)
	}
	output, ok := g.sections[a.Name]
	if !ok {
		t.Fatalf("the attack never started: cordon exited %d\nstdout:\n%s\nstderr:\n%s", g.res.code, g.res.stdout, g.res.stderr)
	}
	want := 0
	if a.Expect.Exit != nil {
		want = *a.Expect.Exit
	}
	if g.res.code != want {
		t.Errorf("cordon exited %d, want %d\nstderr:\n%s", g.res.code, want, g.res.stderr)
	}
	if want == 0 && !strings.Contains(output, "@@END") {
		t.Errorf("the attack did not finish within its own time limit")
	}
	// One run plays the whole group: a canary hit belongs to the attacks
	// that name the canary, or to all of them when none does.
	tr := trace{output: output, records: func() []audit.Record { return readAuditIfAny(g.audit) }}
	if g.claims(a, "{canary_port}") {
		tr.tcpHits = g.canary.hits.Load()
	}
	if g.claims(a, "{udp_canary_port}") {
		tr.udpHits = g.udp.hits.Load()
	}
	return tr
}

// claims reports whether a canary hit during a run is put down to a.
func (g *escapeGroup) claims(a *escapeAttack, placeholder string) bool {
	if strings.Contains(a.Cmd, placeholder) {
		return true
	}
	return !slices.ContainsFunc(g.attacks, func(o *escapeAttack) bool { return strings.Contains(o.Cmd, placeholder) })
}

// breaches lists every sign that the attack got through.
func (g *escapeGroup) breaches(t *testing.T, a *escapeAttack, x *strings.Replacer, env escapeEnv, tr trace) []string {
	t.Helper()
	e := a.Expect
	var got []string
	if strings.Contains(tr.output, escapeMarker) {
		got = append(got, "it printed "+escapeMarker)
	}
	for _, s := range append(slices.Clone(e.Never), g.canary.banner) {
		if s = x.Replace(s); strings.Contains(tr.output, s) {
			got = append(got, fmt.Sprintf("its output holds %q", s))
		}
	}
	for _, s := range env.secrets {
		if strings.Contains(tr.output, s) {
			got = append(got, "its output holds a secret")
		}
	}
	got = append(got, g.lootLeaks(a, env)...)
	if *e.Blocked {
		if tr.tcpHits > 0 {
			got = append(got, fmt.Sprintf("the host-loopback canary on 127.0.0.1:%d took %d connection(s)", g.canary.port, tr.tcpHits))
		}
		if tr.udpHits > 0 {
			got = append(got, fmt.Sprintf("the host-loopback UDP canary on 127.0.0.1:%d took %d datagram(s)", g.udp.port, tr.udpHits))
		}
		for _, p := range originSaw("/escape/" + a.Name) {
			got = append(got, "the test host received "+p)
		}
	}
	if g.proxy != nil {
		for _, p := range tokenSeen(g.proxy.token(), "/escape/"+a.Name, "/ok/"+a.Name) {
			got = append(got, "the proxy token reached the test host in a header of "+p)
		}
	}
	if e.Gone != "" {
		argv := strings.Fields(x.Replace(e.Gone))
		if !eventually(5*time.Second, func() bool { return len(procsRunning(argv...)) == 0 }) {
			got = append(got, fmt.Sprintf("processes %q outlived the run: %v", argv, procsRunning(argv...)))
		}
		if out, err := run(t, 10*time.Second, asUser(t, nil, "true")); err != nil {
			got = append(got, fmt.Sprintf("the test user cannot start a process on the host any more: %v %s", err, out))
		}
	}
	for _, p := range e.HostAbsent {
		if p = x.Replace(p); fileExists(p) {
			got = append(got, "the host has "+p)
			os.Remove(p)
		}
	}
	if g.Via == "run" && bytes.Contains(readFileIfAny(g.audit), []byte(escapeMarker)) {
		got = append(got, "the audit log holds a line the sandbox wrote")
	}
	return got
}

// missingRecords waits up to 5s for each wanted record and returns those
// that never appeared.
func missingRecords(want []auditWant, x *strings.Replacer, records func() []audit.Record) []auditWant {
	var missing []auditWant
	deadline := time.Now().Add(5 * time.Second)
	for _, w := range want {
		w = w.expand(x)
		for !slices.ContainsFunc(records(), w.matches) {
			if time.Now().After(deadline) {
				missing = append(missing, w)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return missing
}

// play runs a proxy attack and returns its output.
func (g *escapeGroup) play(t *testing.T, a *escapeAttack, x *strings.Replacer) string {
	t.Helper()
	if a.Raw != nil {
		return a.Raw.play(g.proxy, x)
	}
	env := []string{}
	for k, v := range g.proxy.env {
		env = append(env, k+"="+v)
	}
	cmd := asUser(t, env, "sh", "-c", g.script(a))
	out, err := run(t, 60*time.Second, cmd)
	if err != nil && strings.Contains(err.Error(), "timed out") {
		t.Errorf("the attack did not finish: %v", err)
	}
	return out
}

// play speaks the exchange to the proxy and returns its transcript.
func (x rawExchange) play(p *proxyProc, r *strings.Replacer) string {
	var out strings.Builder
	u, _ := url.Parse(p.URL())
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return "dial the proxy: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+p.token()))
	var conn io.ReadWriter = c
	br := bufio.NewReader(c)
	if x.Connect != "" {
		target := r.Replace(x.Connect)
		if x.HTTP10 {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.0\r\nProxy-Authorization: %s\r\n\r\n", target, auth)
		} else {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, auth)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return "CONNECT failed: " + err.Error()
		}
		fmt.Fprintf(&out, "CONNECT %d %s\n", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"))
		if resp.StatusCode != http.StatusOK {
			return out.String()
		}
		conn = &bufConn{Conn: c, r: br}
	}
	if x.Lead != "" {
		if _, err := io.WriteString(conn, r.Replace(x.Lead)); err != nil {
			fmt.Fprintf(&out, "write: %v\n", err)
			return out.String()
		}
	}
	if x.Pause != "" {
		d, err := time.ParseDuration(x.Pause)
		if err != nil {
			return "bad pause: " + err.Error()
		}
		time.Sleep(d)
	}
	if x.TLS != "" {
		pem, _ := os.ReadFile(p.env["SSL_CERT_FILE"])
		pool := rootsOf(pem)
		tc := tls.Client(conn.(net.Conn), &tls.Config{ServerName: r.Replace(x.TLS), RootCAs: pool, NextProtos: x.ALPN})
		if err := tc.Handshake(); err != nil {
			fmt.Fprintf(&out, "TLS failed: %v\n", err)
			return out.String()
		}
		fmt.Fprintf(&out, "TLS ok %s\n", tc.ConnectionState().NegotiatedProtocol)
		conn, br = tc, bufio.NewReader(tc)
	}
	if len(x.Send) == 0 {
		line, err := br.ReadString('\n')
		fmt.Fprintf(&out, "read: %q %v\n", line, err)
		return out.String()
	}
	for _, s := range x.Send {
		s = strings.ReplaceAll(r.Replace(s), "{auth}", auth)
		if _, err := io.WriteString(conn, s); err != nil {
			fmt.Fprintf(&out, "write: %v\n", err)
			return out.String()
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			fmt.Fprintf(&out, "response: %v\n", err)
			return out.String()
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		fmt.Fprintf(&out, "HTTP %d %s\n%s\n", resp.StatusCode, resp.Header.Get("X-Cordon-Reason"), body)
	}
	return out.String()
}

// lootLeaks lists the files holding a secret that an attack left: its
// own loot, or (for a run) anything in the workspace outside every loot.
func (g *escapeGroup) lootLeaks(a *escapeAttack, env escapeEnv) []string {
	if g.leaks == nil || g.Via == "proxy" {
		g.leaks = scanForSecrets(g.ws, env.secrets)
	}
	own := g.loot(a) + string(filepath.Separator)
	shared := filepath.Join(g.ws, ".escape", "loot") + string(filepath.Separator)
	var got []string
	for p := range g.leaks {
		if strings.HasPrefix(p, own) || g.Via == "run" && !strings.HasPrefix(p, shared) {
			got = append(got, "a secret is in "+p)
		}
	}
	slices.Sort(got)
	return got
}

// scanForSecrets reads every regular file under root (never following a
// link) and returns those holding any of the secrets.
func scanForSecrets(root string, secrets []string) map[string]bool {
	found := map[string]bool{}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		// Read in blocks that overlap by the longest secret, so one split
		// across two blocks is still found.
		buf := make([]byte, 0, 1<<20+longest)
		for {
			n, err := f.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			for _, s := range secrets {
				if bytes.Contains(buf, []byte(s)) {
					found[p] = true
					return nil
				}
			}
			if err != nil {
				return nil
			}
			keep := min(len(buf), longest)
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
	})
	return found
}

// originSaw lists what the test host received under an attack's path,
// over HTTP or UDP.
func originSaw(prefix string) []string {
	var got []string
	collect := func(k, _ any) bool {
		if p := k.(string); p == prefix || strings.HasPrefix(p, prefix+"/") {
			got = append(got, p)
		}
		return true
	}
	seen.Range(collect)
	escapeUDPSeen.Range(collect)
	return got
}

// tokenSeen lists requests under the prefixes whose headers reached the
// test host holding the proxy token, bare or as Basic credentials.
func tokenSeen(token string, prefixes ...string) []string {
	var got []string
	if token == "" {
		return nil
	}
	basic := base64.StdEncoding.EncodeToString([]byte("cordon:" + token))
	seen.Range(func(k, v any) bool {
		p := k.(string)
		for _, pre := range prefixes {
			if p != pre && !strings.HasPrefix(p, pre+"/") {
				continue
			}
			for name, vals := range v.(http.Header) {
				if v := name + strings.Join(vals, " "); strings.Contains(v, token) || strings.Contains(v, basic) {
					got = append(got, p)
				}
			}
		}
		return true
	})
	return got
}

// ownInterfaceAddr is an IPv4 address of one of this host's own
// interfaces that is not loopback, preferring one on a non-loopback
// interface: what invariant 11 calls "this host's own addresses".
func ownInterfaceAddr(t *testing.T) netip.Addr {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatalf("list this host's interfaces: %v", err)
	}
	var fallback netip.Addr
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil || ifc.Flags&net.FlagUp == 0 {
			continue
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || !p.Addr().Is4() || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
				continue
			}
			if ifc.Flags&net.FlagLoopback == 0 {
				return p.Addr()
			}
			if !fallback.IsValid() {
				fallback = p.Addr()
			}
		}
	}
	if !fallback.IsValid() {
		t.Fatal("this host has no IPv4 address besides loopback, so invariant 11's own-address attack cannot run; give it one (any interface)")
	}
	return fallback
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func readFileIfAny(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// tcpCanary is a host-loopback service an attack must never reach.
type tcpCanary struct {
	port   int
	banner string
	hits   atomic.Int64
}

func newTCPCanary(t *testing.T) *tcpCanary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := &tcpCanary{port: ln.Addr().(*net.TCPAddr).Port, banner: "CANARY-" + randomHex(8)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1)
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(conn, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"+c.banner+"\n")
			conn.Close()
		}
	}()
	return c
}

// udpCanary is a host-loopback UDP echo an attack must never reach.
type udpCanary struct {
	port int
	hits atomic.Int64
}

func newUDPCanary(t *testing.T) *udpCanary {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c := &udpCanary{port: pc.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.hits.Add(1)
			pc.WriteTo(buf[:n], from)
		}
	}()
	return c
}

// originUDPEcho starts, once, a UDP echo on the test host that records
// every payload it receives.
func originUDPEcho() (int, error) {
	originUDPOnce.Do(func() {
		var pc net.PacketConn
		originUDPError = inNetNS(originNS, func() (err error) {
			pc, err = net.ListenPacket("udp", originAddr+":0")
			return err
		})
		if originUDPError != nil {
			return
		}
		originUDPPort = pc.LocalAddr().(*net.UDPAddr).Port
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				escapeUDPSeen.Store(strings.TrimSpace(string(buf[:n])), struct{}{})
				pc.WriteTo(buf[:n], from)
			}
		}()
	})
	return originUDPPort, originUDPError
}

// inNetNS runs f on a thread inside a named network namespace.
func inNetNS(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter netns %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		panic("cannot return to the test's own network namespace: " + err.Error())
	}
	return ferr
}
