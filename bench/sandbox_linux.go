package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// The clients of the sandbox section, by the names the report uses.
const (
	sInsideEnv         = "inside, proxy-env"
	sInsideTransparent = "inside, transparent"
	sOutside           = "outside, cordon proxy"
)

// sandboxRatios compare each way from inside with the same client outside.
var sandboxRatios = []ratio{
	{num: sInsideEnv, den: sOutside},
	{num: sInsideTransparent, den: sOutside},
}

// replyTimeout bounds the wait for a client's ready line and, beyond the
// measurement's own time bound, for one result.
const replyTimeout = 90 * time.Second

// sandboxSection measures the benchmark's own client inside cordon run
// --net restricted, through the proxy variables and transparently, against
// the same client outside through cordon proxy, interleaved round by round,
// and writes the section.
func sandboxSection(w io.Writer, bin string, s settings, progress io.Writer) {
	fmt.Fprintf(w, "\n## Clients inside the restricted sandbox\n\n")
	base, err := os.MkdirTemp("", "cordon-bench-sandbox-")
	if err != nil {
		fmt.Fprintf(w, "not available: %v\n", err)
		return
	}
	defer os.RemoveAll(base)
	fmt.Fprintf(progress, "bench: sandbox section: starting cordon proxy and the clients\n")
	b, err := startSandboxBench(bin, base, s)
	if err != nil {
		fmt.Fprintf(w, "not available: %v\n", err)
		return
	}
	res := b.measure(s.rounds, s.dur, progress)
	b.stop()
	b.report(w, res, s)
}

// sandboxBench is the sandbox section's origin, cordon proxy and clients.
type sandboxBench struct {
	// who runs cordon and the clients.
	who     string
	clients []*client
	closers []func()
}

// client is one long-lived client process and the cordon session it goes
// through.
type client struct {
	name string
	// audit is the session's audit log.
	audit string
	// unavailable says why the client never became ready.
	unavailable string
	// failed says why the client stopped answering.
	failed error
	p      *proc
}

// startSandboxBench starts, in base, the origin, a cordon proxy as the
// test user (when root), and the three clients, each ready after its
// warm-up; a client that could not start is marked unavailable.
func startSandboxBench(bin, base string, s settings) (*sandboxBench, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if err := ensureBinary(bin); err != nil {
		return nil, err
	}
	home, ws, auditDir := filepath.Join(base, "home"), filepath.Join(base, "workspace"), filepath.Join(base, "audit")
	r, who, err := newRunner(base, home, ws, auditDir)
	if err != nil {
		return nil, err
	}
	o, err := startOrigin(base, s.bulkSize, s.originH2)
	if err != nil {
		return nil, err
	}
	b := &sandboxBench{who: who, closers: []func(){o.Close}}
	exe, err := copyExecutable(filepath.Join(ws, "bench-client"))
	if err != nil {
		b.stop()
		return nil, err
	}
	port := o.TLSAddr[strings.LastIndexByte(o.TLSAddr, ':')+1:]
	policyFlags := []string{"--ephemeral-ca", "--allow", originName + ":" + port, "--allow", o.TLSAddr,
		"--resolve", originName + "=127.0.0.1", "--extra-ca", o.CAFile}
	clientArgs := func(mode string) []string {
		return []string{exe, "-client", mode, "-url", "https://" + originName + ":" + port,
			"-dur", s.dur.String(), "-bulk-mib", strconv.FormatInt(s.bulkSize>>20, 10)}
	}
	outside := &client{name: sOutside, audit: filepath.Join(auditDir, "proxy.jsonl")}
	px, exports, err := startCordonProxy(r, append([]string{bin, "proxy", "--audit", outside.audit}, policyFlags...),
		filepath.Join(base, "proxy.stderr"))
	if err != nil {
		b.stop()
		return nil, err
	}
	b.closers = append(b.closers, px.stop)
	inside := func(name, mode string) (*client, []string) {
		c := &client{name: name, audit: filepath.Join(auditDir, mode+".jsonl")}
		argv := append([]string{bin, "run", "--net", "restricted", "--audit", c.audit, "--timeout", "30m"}, policyFlags...)
		return c, append(append(argv, "--"), clientArgs(mode)...)
	}
	envClient, envArgv := inside(sInsideEnv, modeProxyEnv)
	tpClient, tpArgv := inside(sInsideTransparent, modeTransparent)
	for _, c := range []struct {
		c     *client
		argv  []string
		extra []string
	}{
		{envClient, envArgv, nil},
		{tpClient, tpArgv, nil},
		{outside, clientArgs(modeProxyEnv), exports},
	} {
		b.clients = append(b.clients, c.c)
		c.c.p, err = startProc(r.command(context.Background(), c.argv, c.extra...), filepath.Join(base, c.c.name+".stderr"))
		if err != nil {
			c.c.unavailable = err.Error()
			continue
		}
		b.closers = append(b.closers, c.c.p.stop)
		if _, err := c.c.next(replyTimeout); err != nil {
			c.c.unavailable = err.Error()
		}
	}
	return b, nil
}

// measure runs rounds of every figure on every client, the clients in
// turn with the first rotating each round, so that the three measurements
// a ratio's round pairs ran one after the other. A client whose figure
// failed once is not asked for it again.
func (b *sandboxBench) measure(rounds int, d time.Duration, progress io.Writer) results {
	res := results{}
	for _, c := range b.clients {
		for _, f := range clientFigures {
			res.at(c.name, f).unavailable = c.unavailable
		}
	}
	for round := range rounds {
		fmt.Fprintf(progress, "bench: sandbox round %d/%d\n", round+1, rounds)
		for _, f := range clientFigures {
			for i := range b.clients {
				c := b.clients[(round+i)%len(b.clients)]
				cl := res.at(c.name, f)
				if cl.unavailable != "" || cl.err != nil {
					continue
				}
				v, err := c.ask(f, d+replyTimeout)
				if err != nil {
					cl.err = err
					continue
				}
				cl.samples = append(cl.samples, v)
			}
		}
	}
	return res
}

// stop ends every process and the origin.
func (b *sandboxBench) stop() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
}

// report writes the section's text and tables.
func (b *sandboxBench) report(w io.Writer, res results, s settings) {
	fmt.Fprintf(w, "A client inside the restricted sandbox (proxy-env and transparent), measured against the same client outside through `cordon proxy`. The client is this benchmark's own binary in client mode (`bench -client MODE`, Go net/http, HTTP/1.1), run as %s; the origin is the HTTPS server above, on 127.0.0.1, under the name %s, which every session pins to it (--resolve) and allows by name and by address, with the origin's CA as --extra-ca and an ephemeral CA. Every session terminates TLS, and every client trusts the bundle SSL_CERT_FILE names.\n\n", b.who, originName)
	fmt.Fprintf(w, "- %s: `cordon run --net restricted`; Go's ProxyFromEnvironment sends it to the proxy's listener at 10.0.2.2:3128 inside the box's own network namespace.\n", sInsideEnv)
	fmt.Fprintf(w, "- %s: the same, with no proxy: %s resolves to a fake address from cordon's resolver, and nftables redirects the connection to the proxy's transparent listener.\n", sInsideTransparent, originName)
	fmt.Fprintf(w, "- %s: the client on the host with the environment `cordon proxy` exported (HTTPS_PROXY, SSL_CERT_FILE).\n\n", sOutside)
	fmt.Fprintf(w, "The three clients start once, warm every figure up, then answer one figure at a time. Each of %d rounds (the proxy section's rounds) measures every figure on the three in turn, the first rotating each round; each measurement stops after %s or the figure's request cap; a cell is the median over rounds, with the lowest and highest round in brackets. Here the client, cordon and the origin (in the benchmark) are separate processes sharing the machine's cores, so these figures are not comparable with the proxy section's, where all three share one process; compare within this table.\n\n", s.rounds, s.dur)
	names := make([]string, len(b.clients))
	for i, c := range b.clients {
		names[i] = c.name
	}
	figureTable(w, "client", names, clientFigures, res)
	fmt.Fprintf(w, "\n### Ratios inside / outside\n\n")
	ratioTable(w, sandboxRatios, clientFigures, res)
	fmt.Fprintf(w, "\nEach ratio is the median over rounds of the two clients' figures from the same round, with the lowest and highest round in brackets. For information: no target.\n")
	fmt.Fprintf(w, "\nAllowed requests in each session's audit log, by how they arrived:")
	for i, c := range b.clients {
		sep := ";"
		if i == len(b.clients)-1 {
			sep = "."
		}
		fmt.Fprintf(w, " %s %s%s", c.name, requestKinds(c.audit), sep)
	}
	fmt.Fprintln(w)
}

// requestKinds counts the allowed request lines in an audit log by kind,
// or says why it could not.
func requestKinds(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	counts := map[audit.Kind]int{}
	rd := audit.NewReader(f, nil)
	for rd.Next() {
		if r := rd.Record(); r.Type == audit.TypeDecision && r.Decision == audit.Allow && r.Method != "" {
			counts[r.Kind]++
		}
	}
	if err := rd.Err(); err != nil {
		return "(" + err.Error() + ")"
	}
	var parts []string
	for _, k := range []audit.Kind{audit.KindConnect, audit.KindTransparent, audit.KindHTTP} {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

// copyExecutable copies the running benchmark to dst, executable by all,
// where the sandbox and the test user can run it.
func copyExecutable(dst string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the benchmark's executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return "", fmt.Errorf("copy the client: %w", err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return "", fmt.Errorf("copy the client: %w", err)
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return "", fmt.Errorf("copy the client to %s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("copy the client to %s: %w", dst, err)
	}
	return dst, nil
}

// startCordonProxy starts `cordon proxy` (argv) and reads its export
// lines, the last of which sets no_proxy, into NAME=value pairs.
func startCordonProxy(r *runner, argv []string, stderr string) (*proc, []string, error) {
	p, err := startProc(r.command(context.Background(), argv), stderr)
	if err != nil {
		return nil, nil, err
	}
	var env []string
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.stop()
				return nil, nil, fmt.Errorf("cordon proxy exited before it was ready: %s", p.why())
			}
			name, val, err := parseExport(l)
			if err != nil {
				p.stop()
				return nil, nil, fmt.Errorf("cordon proxy printed %q: %w", clip(l, 100), err)
			}
			env = append(env, name+"="+val)
			if name == "no_proxy" {
				return p, env, nil
			}
		case <-deadline:
			p.stop()
			return nil, nil, fmt.Errorf("cordon proxy was not ready within 20s: %s", p.why())
		}
	}
}

// parseExport reads one `export NAME='value'` line as cordon proxy prints
// it, undoing the shell escape of a single quote inside the value.
func parseExport(l string) (string, string, error) {
	rest, ok := strings.CutPrefix(l, "export ")
	name, quoted, found := strings.Cut(rest, "=")
	if !ok || !found || name == "" || len(quoted) < 2 || !strings.HasPrefix(quoted, "'") || !strings.HasSuffix(quoted, "'") {
		return "", "", errors.New("want export NAME='value'")
	}
	return name, strings.ReplaceAll(quoted[1:len(quoted)-1], `'\''`, "'"), nil
}

// ask has the client measure a figure and returns the result in the
// figure's unit.
func (c *client) ask(fig string, timeout time.Duration) (float64, error) {
	if c.failed != nil {
		return 0, c.failed
	}
	if _, err := io.WriteString(c.p.stdin, fig+"\n"); err != nil {
		c.failed = fmt.Errorf("ask the client for %s: %w (%s)", fig, err, c.p.why())
		return 0, c.failed
	}
	r, err := c.next(timeout)
	if err != nil {
		return 0, err
	}
	if r.Error != "" {
		return 0, errors.New(r.Error)
	}
	return r.Value, nil
}

// next reads the client's next line; a client that exits, writes
// something else or is silent for timeout has failed (and is stopped).
func (c *client) next(timeout time.Duration) (clientResult, error) {
	var r clientResult
	select {
	case l, ok := <-c.p.lines:
		switch {
		case !ok:
			c.failed = fmt.Errorf("the client exited: %s", c.p.why())
		case json.Unmarshal([]byte(l), &r) != nil:
			c.failed = fmt.Errorf("the client wrote %q, not a result line", clip(l, 100))
		default:
			return r, nil
		}
	case <-time.After(timeout):
		c.failed = fmt.Errorf("the client did not answer within %s", timeout)
	}
	c.p.stop()
	return r, c.failed
}

// proc is a long-lived process of the sandbox section: its stdin, its
// stdout line by line, its stderr in a file.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr string
	once   sync.Once
}

// startProc starts cmd with its stderr in the file stderr.
func startProc(cmd *exec.Cmd, stderr string) (*proc, error) {
	f, err := os.Create(stderr)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	defer f.Close()
	cmd.Stderr = f
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	p := &proc{cmd: cmd, stdin: stdin, lines: make(chan string), stderr: stderr}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// why is what the process wrote on stderr, on one line.
func (p *proc) why() string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "nothing on stderr"
	}
	return clip(strings.Join(lines, " / "), 300)
}

// stop closes stdin and sends SIGTERM, then kills the process group if
// the process has not exited within ten seconds; it waits for the exit.
func (p *proc) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		p.cmd.Process.Signal(syscall.SIGTERM)
		go func() {
			for range p.lines {
			}
		}()
		done := make(chan struct{})
		go func() {
			p.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}
