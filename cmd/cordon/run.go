package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/certs"
	"github.com/cordon-sandbox/cordon/credinject"
	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
	"github.com/cordon-sandbox/cordon/sandbox/denycmd"
	"github.com/cordon-sandbox/cordon/session"
)

func init() { register("run", newRunCmd) }

// exitRefused is cordon run's exit code when nothing was started: a
// refusal, a missing mechanism or an unwritable audit log.
const exitRefused = 125

// runFlags are cordon run's own flags.
type runFlags struct {
	pf         policyFlags
	net        string
	allowPaths []string
	env        []string
	timeout    time.Duration
	memory     string
	pids       int
	json       bool
	dryRun     bool
	target     string
	audit      string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG]...",
		Short: "Run a command in the sandbox",
		Long: `Run a command in the sandbox: the system read-only, the workspace (the project
holding the working directory) read-write, an empty HOME, credential stores
hidden, a seccomp filter, limits, and the network off, open or restricted to
an allowlist. A policy that cannot be enforced here is refused, never run
uncontained; cordon doctor shows why.

Exit status: the command's; 124 when --timeout ended it; 125 when nothing
started (refused, blocked, or the sandbox failed); 126 not executable; 127
not found.`,
		Args: commandArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				if name := dashTaken(cmd); name != "" {
					return fmt.Errorf("--%s has no value: it took the -- that starts the command; give it one before --, as in: cordon run --net off -- make test", name)
				}
				return fmt.Errorf("put the command after --, as in: cordon run --net off -- make test")
			}
			if err := f.overrides(cmd); err != nil {
				return err
			}
			if f.dryRun {
				return f.plan(cmd.OutOrStdout(), args)
			}
			if f.target != "" {
				return fmt.Errorf("--target only plans (--dry-run); a run uses this machine's sandbox")
			}
			return f.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.net, "net", "", "network mode: off, open (the host's network, no audit) or restricted (the allowlist, through the proxy)")
	fl.StringArrayVar(&f.allowPaths, "allow-path", nil, "expose a host path, PATH (read-only) or PATH:rw (repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "pass a host environment variable by NAME (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 0, "end the whole process tree after this long, e.g. 10m (0 lifts the configured deadline)")
	fl.StringVar(&f.memory, "memory", "", "memory limit in bytes, e.g. 4GiB (0 lifts it)")
	fl.IntVar(&f.pids, "pids", 0, "process limit (0 lifts it)")
	fl.BoolVar(&f.json, "json", false, "print one outcome object on stdout when the command ends")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the exact launcher argv and generated files; run nothing")
	fl.StringVar(&f.target, "target", "", "with --dry-run: the platform to plan for, linux or darwin (the Seatbelt profile can be rendered anywhere)")
	fl.StringVar(&f.audit, "audit", "", "audit log file (default $CORDON_AUDIT or ~/.local/state/cordon/audit.jsonl)")
	f.pf.register(cmd)
	return cmd
}

// overrides turns the flags into one-shot policy overrides.
func (f *runFlags) overrides(cmd *cobra.Command) error {
	o := &f.pf.overrides
	if f.net != "" {
		m, err := policy.ParseNetMode(f.net)
		if err != nil {
			return fmt.Errorf("--net: %w", err)
		}
		o.Network = &m
	}
	o.AllowPaths = append(o.AllowPaths, f.allowPaths...)
	o.Env = append(o.Env, f.env...)
	fl := cmd.Flags()
	if fl.Changed("timeout") {
		if f.timeout < 0 {
			return fmt.Errorf("--timeout %s: a deadline cannot be negative", f.timeout)
		}
		o.Timeout = &f.timeout
	}
	if fl.Changed("memory") {
		n, err := policy.ParseSize(f.memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		o.Memory = &n
	}
	if fl.Changed("pids") {
		if f.pids < 0 {
			return fmt.Errorf("--pids %d: a process limit cannot be negative", f.pids)
		}
		o.Pids = &f.pids
	}
	return nil
}

// auditPath is --audit, else the default location.
func (f *runFlags) auditPath() (string, error) {
	if f.audit != "" {
		return f.audit, nil
	}
	return audit.DefaultPath()
}

// spec loads the policy, which finds the workspace, and says what it read.
func (f *runFlags) spec(argv []string) (*sandbox.Spec, policy.Sources, error) {
	p, src, err := f.pf.loadFrom(policy.LoadOptions{})
	if err != nil {
		return nil, src, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, src, fmt.Errorf("find the working directory: %w", err)
	}
	ws := src.Workspace
	// The box may neither read nor write cordon's configuration: the
	// global config this run read, and the CA.
	config := []string{src.Global}
	if ca, err := certs.DefaultDir(); err == nil {
		config = append(config, ca)
	}
	// The project files above the workspace are as much the run's
	// policy as its own, which is read-only in the box.
	var above []string
	for _, f := range src.Projects {
		if f != src.Project {
			above = append(above, f)
		}
	}
	return &sandbox.Spec{
		Policy: p, Argv: argv, Workdir: cwd, Workspace: ws, Timeout: p.Limits.Timeout, Config: config, Projects: above, Sweep: true,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
	}, src, nil
}

// writableDirs are the directories a sandbox may have written, as real
// paths (those that exist): the workspace of s, its read-write
// allow_paths, and those the global config grants (granted,
// Sources.Granted), which a project file may have narrowed away for this
// run but not for the earlier ones.
func writableDirs(s *sandbox.Spec, granted []string) []string {
	out := []string{s.Workspace}
	for _, p := range append(s.Policy.WritePaths(), granted...) {
		if real, err := filepath.EvalSymlinks(p); err == nil && !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
}

// refusal is why a run is refused before anything of it starts: the
// audit reason, what is wrong, and how to fix it.
type refusal struct{ reason, detail, fix string }

// precheck refuses a run from its policy, command line and where cordon
// keeps its cache (which the global config's grants, granted, may have
// opened to earlier runs), with nothing read, run or started: a run and
// --dry-run make these checks alike.
func (f *runFlags) precheck(s *sandbox.Spec, granted, argv []string) *refusal {
	if m, denied := denycmd.New(s.Policy.DenyCommands, os.Getenv("PATH"), s.Workdir).Check(argv); denied {
		return &refusal{"deny_command", m.String(), "run a command that is not on deny_commands; only the global config can remove one"}
	}
	if len(f.pf.credentials) > 0 && s.Policy.Network != policy.NetRestricted {
		return &refusal{"policy", "--credential needs --net restricted: only the proxy can put a credential on a request", "add --net restricted"}
	}
	home := ""
	if me, err := user.Current(); err == nil {
		home = me.HomeDir
	}
	if err := sandbox.CheckCacheOutside(sandbox.CacheDir(), home, writableDirs(s, granted)); err != nil {
		return &refusal{"cache", err.Error(), "point $XDG_CACHE_HOME outside the workspace and every read-write --allow-path (XDG_CACHE_HOME=$HOME/.cache cordon run ... for cordon alone), and remove the cordon directory the command could write"}
	}
	return nil
}

// planCheck is precheck, and for a restricted run what a run checks when
// its credentials load and its proxy starts, short of reading a secret
// or running a source: the selected credentials are configured and well
// formed, and the extra CA files hold certificates.
func (f *runFlags) planCheck(s *sandbox.Spec, granted, argv []string) *refusal {
	if rf := f.precheck(s, granted, argv); rf != nil || s.Policy.Network != policy.NetRestricted {
		return rf
	}
	if err := credinject.Check(s.Policy.Credentials, f.pf.credentials); err != nil {
		return &refusal{"credentials", err.Error(), ""}
	}
	if err := certs.CheckExtraCAs(s.Policy.ExtraCA); err != nil {
		return &refusal{"proxy", "trust bundle: " + err.Error(), ""}
	}
	return nil
}

// plan prints the launch for --dry-run.
func (f *runFlags) plan(out io.Writer, argv []string) error {
	path, err := f.auditPath()
	if err != nil {
		return err
	}
	s, src, err := f.spec(argv)
	if err != nil {
		return exitError{code: exitRefused, msg: err.Error()}
	}
	if rf := f.planCheck(s, src.Granted, argv); rf != nil {
		return exitError{code: exitRefused, msg: "blocked: " + rf.detail, fix: rf.fix}
	}
	b, err := targetBackend(f.target, path)
	if err != nil {
		return err
	}
	if b.Name() == "seatbelt" {
		illustrateSeatbelt(s)
	}
	plan, err := b.Plan(s)
	if err != nil {
		return exitError{code: exitRefused, msg: err.Error()}
	}
	hidePassedValues(plan.Argv, s.Policy.Env)
	if f.json {
		return writeJSON(out, plan)
	}
	fmt.Fprintln(out, "# launcher argv")
	for i, a := range plan.Argv {
		sep := " \\"
		if i == len(plan.Argv)-1 {
			sep = ""
		}
		indent := "  "
		if i == 0 {
			indent = ""
		}
		fmt.Fprintf(out, "%s%s%s\n", indent, shellQuote(a), sep)
	}
	names := make([]string, 0, len(plan.Files))
	for n := range plan.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(out, "# generated files")
	for _, n := range names {
		fmt.Fprintf(out, "== %s (%d bytes)\n%s", n, len(plan.Files[n]), plan.Files[n])
		if c := plan.Files[n]; c != "" && !strings.HasSuffix(c, "\n") {
			fmt.Fprintln(out)
		}
	}
	return nil
}

// hidePassedValues replaces, in a launcher argv, the values of the host
// variables passed by name (env:, --env), which may be secrets, with their
// length: a plan is for reading and pasting. Options are read in turn from
// the one that clears the environment, so no other argument is taken for
// a --setenv.
func hidePassedValues(argv, names []string) {
	i := slices.Index(argv, "--clearenv")
	if i < 0 {
		return
	}
	for i++; i+2 < len(argv) && argv[i] == "--setenv"; i += 3 {
		if name := argv[i+1]; slices.Contains(names, name) {
			argv[i+2] = fmt.Sprintf("[value of $%s, %d bytes, not shown]", name, len(argv[i+2]))
		}
	}
}

// outcome is the --json object cordon run prints when it is done.
type outcome struct {
	Outcome struct {
		// Kind is completed, blocked, timeout or failed_to_start.
		Kind     string `json:"kind"`
		ExitCode *int   `json:"exitCode,omitempty"`
		Signal   string `json:"signal,omitempty"`
		Reason   string `json:"reason,omitempty"`
		Fix      string `json:"fix,omitempty"`
	} `json:"outcome"`
	Sandbox struct {
		Launcher string `json:"launcher"`
		Version  string `json:"version"`
	} `json:"sandbox"`
	Network struct {
		Mode string `json:"mode"`
		// AllowedDomains is the effective allowlist: empty when the
		// network is off, ["*"] when it is open.
		AllowedDomains []string `json:"allowedDomains"`
		// Decisions are the session's first decision lines (decisionList),
		// DecisionsNotListed how many more it wrote.
		Decisions          []audit.Record `json:"decisions"`
		DecisionsNotListed int            `json:"decisionsNotListed,omitempty"`
	} `json:"network"`
	Session    string `json:"session,omitempty"`
	Audit      string `json:"audit,omitempty"`
	DurationMS int64  `json:"durationMs"`
}

// runState carries one cordon run through its steps.
type runState struct {
	f      *runFlags
	argv   []string
	out    outcome
	w      *audit.Writer
	cwd    string
	errw   io.Writer
	stdout io.Writer
	// decisions keeps the session's decision lines for --json.
	decisions decisionList
	// verdict, once the capability check has started, waits for it and
	// returns its first BLOCKED capability.
	verdict func() (sandbox.Capability, bool)
	// suspended says which signal stopped the run's job from the
	// terminal, ending the run (endOnSuspend); nil, or 0, for none.
	suspended func() syscall.Signal
	// launched says the launch was recorded: from then on the command
	// may write to stdout, before the outcome.
	launched bool
	// creds are the selected credentials, once loaded (loadCredentials).
	creds *credinject.Set
	// terminalLogged are the kinds of control string dropped from the
	// command's output to a terminal, and keys, logged (logTerminal);
	// terminalCapped counts the capped ones logged, by reason.
	terminalMu     sync.Mutex
	terminalLogged map[string]bool
	terminalCapped map[string]int
}

// refuseBlocked waits for the capability check and refuses the run when
// it found a BLOCKED capability; nil means the run may go on.
func (r *runState) refuseBlocked() error {
	if _, blocked := r.verdict(); blocked {
		return r.refuse("capability_blocked", "", "")
	}
	return nil
}

// refuse records and reports a run that starts nothing. Once the
// capability check has started, a BLOCKED capability is the reason given,
// whatever else failed: it is what to fix first.
func (r *runState) refuse(reason, detail, fix string) error {
	if r.verdict != nil {
		if c, blocked := r.verdict(); blocked {
			reason, detail, fix = "capability_blocked", c.Name+": "+c.Reason, c.Fix
		}
	}
	r.out.Outcome.Kind = "blocked"
	r.out.Outcome.Reason, r.out.Outcome.Fix = detail, fix
	if r.w != nil {
		if err := r.w.Write(audit.Record{Type: audit.TypeBlock, Command: r.loggedArgv(), Workdir: r.cwd,
			Network: r.out.Network.Mode, Reason: reason, Detail: detail, Outcome: "blocked"}); err != nil {
			fmt.Fprintf(r.errw, "cordon: %v\n", err)
		}
	}
	r.print()
	return exitError{code: exitRefused, msg: "blocked: " + detail, fix: fix}
}

// notRecorded stands for a command line a refusal's record leaves out.
const notRecorded = "[not recorded: the run was refused before its credentials were loaded, so their secrets could not be masked in it]"

// loggedArgv is the command line as a record of the run holds it: with
// the selected credentials' secrets masked (Redact: in base64 too), or,
// before they are loaded, left out, since it may hold one.
func (r *runState) loggedArgv() []string {
	switch {
	case len(r.f.pf.credentials) == 0:
		return r.argv
	case r.creds == nil:
		return []string{notRecorded}
	}
	argv := make([]string, len(r.argv))
	for i, a := range r.argv {
		argv[i], _ = r.creds.Redact(a)
	}
	return argv
}

// loadCredentials loads the credentials the run selects, as soon as the
// policy is known and before anything else can refuse the run, and masks
// their secrets in every later line of the run: a refusal's record holds
// the command line, which may carry one.
func (r *runState) loadCredentials(s *sandbox.Spec, granted []string) error {
	if len(r.f.pf.credentials) == 0 {
		return nil
	}
	creds, err := credinject.Load(s.Policy.Credentials, r.f.pf.credentials, credinject.Options{Writable: writableDirs(s, granted)})
	if err != nil {
		return r.refuse("credentials", err.Error(), "")
	}
	r.creds = creds
	r.w.SetRedact(creds.Scrub)
	return nil
}

// refuseSecretsInBox refuses a run whose command line or environment (s.Env
// and the host variables the policy passes) holds a credential's real
// value: the command would read it there, and the audit log would record
// the command line. The refusal's record shows the command line masked.
func (r *runState) refuseSecretsInBox(creds *credinject.Set, s *sandbox.Spec) error {
	env := slices.Clone(s.Env)
	for _, name := range s.Policy.Env {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	redacted := make([]string, len(r.argv))
	var inArgv, inEnv, vars []string
	for i, a := range r.argv {
		var held []string
		if redacted[i], held = creds.Redact(a); len(held) > 0 {
			inArgv, vars = append(inArgv, a), append(vars, held...)
		}
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if _, held := creds.Redact(value); len(held) > 0 {
			inEnv, vars = append(inEnv, name), append(vars, held...)
		}
	}
	if len(vars) == 0 {
		return nil
	}
	slices.Sort(vars)
	use := "$" + strings.Join(slices.Compact(vars), " or $")
	r.argv = redacted
	if len(inArgv) > 0 {
		return r.refuse("credential_in_command",
			"the command line holds the real value of a credential, which the sandbox must never see (a process reads its own command line)",
			"write "+use+" instead: it holds the placeholder, which the proxy swaps for the real value on the way to the credential's hosts")
	}
	return r.refuse("credential_in_environment",
		fmt.Sprintf("the sandbox's environment would hold the real value of a credential, in %s, which the sandbox must never see", strings.Join(inEnv, " and ")),
		"stop passing it (--env, or env: in the config); "+use+" holds the placeholder, which the proxy swaps for the real value on the way to the credential's hosts")
}

// print writes the --json outcome. Once the command was launched, its
// output came first on the same stdout and may have ended without a
// newline, which glued the outcome to its last words ("abc{"outcome"…),
// where no reader of the last line could parse it: the outcome then
// starts a line of its own.
func (r *runState) print() {
	if !r.f.json {
		return
	}
	if r.launched {
		io.WriteString(r.stdout, "\n")
	}
	if r.out.Network.AllowedDomains == nil {
		r.out.Network.AllowedDomains = []string{}
	}
	r.out.Network.Decisions, r.out.Network.DecisionsNotListed = r.decisions.take()
	_ = writeJSON(r.stdout, r.out)
}

// maxListedDecisions bounds the decision lines --json lists: the box
// decides how many there are.
const maxListedDecisions = 256

// decisionList keeps the first maxListedDecisions decision lines a
// session writes, for --json, and counts the rest. The proxy writes
// them from its own goroutines, which may outlast the outcome's print.
type decisionList struct {
	mu        sync.Mutex
	kept      []audit.Record
	notListed int
}

// add is an audit.Writer observer.
func (d *decisionList) add(r audit.Record) {
	if r.Type != audit.TypeDecision {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.kept) < maxListedDecisions {
		d.kept = append(d.kept, r)
		return
	}
	d.notListed++
}

// take returns the lines kept so far (never nil) and how many more there were.
func (d *decisionList) take() ([]audit.Record, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]audit.Record{}, d.kept...), d.notListed
}

// outliveReaders keeps cordon alive when whatever reads its output goes
// away (cordon run … | head, or the program that started cordon proxy
// and read its export lines): a write to a broken pipe on its stdout or
// stderr would otherwise kill it with SIGPIPE, before it recorded the exit
// and did the aftercare, or before the proxy wrote its tunnels' close
// lines and removed its trust bundle; and the command decides when cordon
// writes (its output, masked, with --credential; the proxy's client, by
// spending the audit budget). The write fails instead (EPIPE),
// and the command's own output pipe breaks in turn, as in a shell's
// pipeline. A signal cordon asks for, unlike one it ignores, is back to
// its default in the programs cordon starts.
func outliveReaders() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// run is cordon run without --dry-run.
func (f *runFlags) run(ctx context.Context, stdout, stderr io.Writer, argv []string) (failed error) {
	outliveReaders()
	r := &runState{f: f, argv: argv, errw: stderr, stdout: stdout}
	r.cwd, _ = os.Getwd()
	path, err := f.auditPath()
	if err != nil {
		return r.refuse("audit_unavailable", err.Error(), "set --audit or CORDON_AUDIT")
	}
	backend := newBackend(path)
	r.out.Sandbox.Launcher = backend.Name()
	r.out.Audit = path
	if r.w, err = audit.Open(path, audit.NewSessionID()); err != nil {
		return r.refuse("audit_unavailable", err.Error(), audit.Fix(path))
	}
	// The log must be where the guards judged it (sandbox.AuditDirs): if
	// not, it is closed before a line goes into it.
	if err := sandbox.CheckAuditOpened(path, r.w.RealPath()); err != nil {
		r.w.Close()
		r.w = nil
		return r.refuse("audit_unavailable", err.Error(), audit.Fix(path))
	}
	defer r.w.Close()
	r.out.Session = r.w.Session()
	if f.json {
		r.w.SetObserver(r.decisions.add)
	}

	s, src, err := f.spec(argv)
	var fe *policy.FlagError
	switch {
	case errors.As(err, &fe):
		// A flag written wrong is a usage error, as one its own parser
		// refuses (--timeout 5): exit 2, no block line in the log.
		return err
	case err != nil:
		return r.refuse("policy", err.Error(), "")
	}
	if err := r.loadCredentials(s, src.Granted); err != nil {
		return err
	}
	r.w.SetBudget(s.Policy.Limits.AuditBudget)
	for _, d := range sandbox.MissingDenyRead(s.Policy, s.Workspace) {
		fmt.Fprintf(stderr, "cordon: warning: deny_read %s does not exist, so nothing is hidden there; if it held a secret, an earlier run may have moved it, with a directory above it, to a name nothing hides: look for it and put it back (if it is not made yet, the first run after it is hides it)\n", termtext.Printable(d, 0))
	}
	r.out.Network.Mode = string(s.Policy.Network)
	switch s.Policy.Network {
	case policy.NetOpen:
		r.out.Network.AllowedDomains = []string{"*"}
	}

	if rf := f.precheck(s, src.Granted, argv); rf != nil {
		return r.refuse(rf.reason, rf.detail, rf.fix)
	}
	if s.Policy.Network != policy.NetRestricted {
		for _, name := range f.pf.proxyOnly() {
			fmt.Fprintf(stderr, "cordon: warning: %s has no effect with the network %s: only the restricted network's proxy acts on it; add --net restricted for it to\n", name, s.Policy.Network)
		}
	}
	for _, name := range unsetEnv(f.env, os.LookupEnv) {
		fmt.Fprintf(stderr, "cordon: warning: --env %s: %s is not set here, so the command gets no such variable; export it before cordon run, or drop the flag\n", termtext.Printable(name, 0), termtext.Printable(name, 0))
	}
	// The capability check (a memo read, or a probe sandbox) runs beside
	// the set-up below, which starts nothing of the command: the
	// restricted network and the launch wait for its verdict (the latter
	// in s.Commit), and refuse gives a BLOCKED capability as the reason.
	checked := make(chan sandbox.Report, 1)
	go func() { checked <- backend.Check(ctx, s.Policy) }()
	r.verdict = sync.OnceValues(func() (sandbox.Capability, bool) {
		rep := <-checked
		r.out.Sandbox.Version = rep.Version
		return rep.Blocked()
	})
	if s.Policy.Network == policy.NetRestricted {
		// The holder and the proxy start only for a launch that may go
		// ahead. (Checking beside them gains nothing: the holder is a
		// full fork of cordon, which stalls the check's page faults.)
		if err := r.refuseBlocked(); err != nil {
			return err
		}
	}
	if p, ok := backend.(sandbox.Preparer); ok {
		// The restricted network's holder sets up while the proxy starts.
		release := p.Prepare(s)
		defer release()
	}
	// The command's output that a mask holds back is written before what
	// cordon says after the run, which it would otherwise follow.
	flushOutput := func() {}
	// What cordon says while the command runs goes in turn with the
	// command's output where cordon copies that to the same terminal.
	during := &midRun{w: stderr}
	var maskWith *credinject.Set // the secrets masked in the output
	if s.Policy.Network == policy.NetRestricted {
		px, err := session.StartProxy(ctx, session.Options{Policy: s.Policy, Audit: r.w, InSandbox: sandboxInside.OwnNetwork,
			Credentials: f.pf.credentials, Creds: r.creds, EphemeralCA: f.pf.ephemeralCA, Log: during})
		if err != nil {
			return r.refuse("proxy", err.Error(), "")
		}
		defer px.Close()
		netw, env, files, err := px.Sandbox(sandboxInside)
		if err != nil {
			return r.refuse("proxy", err.Error(), "")
		}
		s.Network, s.Env = netw, append(s.Env, env...)
		if s.Files == nil {
			s.Files = map[string][]byte{}
		}
		masked, err := px.Creds.MaskedFiles()
		if err != nil {
			return r.refuse("credentials", err.Error(), "")
		}
		if err := r.refuseSecretsInBox(px.Creds, s); err != nil {
			return err
		}
		for _, m := range []map[string][]byte{files, masked} {
			for k, v := range m {
				s.Files[k] = v
			}
		}
		r.out.Network.AllowedDomains = px.Rules.Names()
		if len(px.Creds.Names()) > 0 {
			maskWith = px.Creds
		}
	}

	cleanup, err := prepareRun(s)
	if err != nil {
		return r.refuse("prepare", err.Error(), "")
	}
	defer cleanup()
	// The backend records the launch while it builds the sandbox, before
	// anything of the command runs: a launch that cannot be recorded
	// starts nothing.
	var commitErr error
	s.Commit = func() error {
		if c, blocked := r.verdict(); blocked {
			return fmt.Errorf("%s is blocked", c.Name)
		}
		commitErr = r.w.Sync(audit.Record{Type: audit.TypeLaunch, Command: argv, Workdir: s.Workdir,
			Network: string(s.Policy.Network)})
		r.launched = commitErr == nil
		return commitErr
	}

	// The exit is recorded (and fsynced) as soon as the backend knows it,
	// while the sandbox is torn down; otherwise once Run returns.
	var exitOnce sync.Once
	recordExit := func(res sandbox.Result, runErr error) {
		exitOnce.Do(func() {
			res, runErr := r.ended(res, runErr)
			if err := r.w.Sync(r.exitRecord(s, res, runErr)); err != nil {
				fmt.Fprintf(during, "cordon: %v\n", err)
			}
		})
	}
	s.Exited = func(res sandbox.Result) { recordExit(res, nil) }

	// The terminal is put back once the sandbox is gone, before cordon
	// waits for the masked output still to be written to it (it would
	// wait for ever on output the command stopped), and again here.
	restoreTerminal := keepTerminal()
	s.Ended = restoreTerminal
	runCtx, stopListening := ctx, func() {}
	held, aside := shareTerminal(s, stderr, r.terminalDropped)
	var rl *relay
	if held {
		runCtx, r.suspended, stopListening = endOnSuspend(ctx)
		if rl, err = relayTerminal(s, r.terminalDropped, r.terminalKeyRebound); err != nil {
			stopListening()
			return r.refuse("terminal", fmt.Sprintf("a pseudo-terminal for the sandboxed command: %v", err),
				"run it with stdin, stdout and stderr away from the terminal (< /dev/null > out.log 2>&1), or fix /dev/ptmx and /dev/pts")
		}
	}
	if rl != nil {
		aside = rl.says()
		s.Ended = func() { rl.boxGone(); restoreTerminal() }
		defer rl.stop()
	}
	if aside != nil {
		during.through(aside)
	}
	if maskWith != nil {
		// Secrets never reach the sandbox, but one could come back in
		// something the command prints: mask its output, after
		// shareTerminal has chosen where it goes.
		mo, me := credinject.NewMaskWriter(s.Stdout, maskWith), credinject.NewMaskWriter(s.Stderr, maskWith)
		s.Stdout, s.Stderr = mo, me
		flushOutput = func() { mo.Close(); me.Close() }
		defer flushOutput()
	}
	res, runErr := backend.Run(runCtx, s)
	stopListening()
	res, runErr = r.ended(res, runErr)
	if rl != nil {
		rl.boxGone()
	}
	restoreTerminal()
	flushOutput()
	if rl != nil {
		// The box's last output, and what the mask held back, reach the
		// terminal before anything cordon says after the run.
		rl.stop()
	}
	settleInput()
	say := &afterTheBox{w: stderr}
	stderr, r.errw = say, say
	during.through(say)
	defer func() {
		if failed != nil {
			say.ready() // main prints it
		}
	}()
	if err := r.refuseBlocked(); err != nil {
		return err
	}
	if commitErr != nil {
		r.out.Outcome.Kind = "failed_to_start"
		r.out.Outcome.Reason = commitErr.Error()
		r.print()
		return exitError{code: exitRefused, msg: fmt.Sprintf("the launch could not be recorded, so nothing started: %v", commitErr)}
	}
	recordExit(res, runErr)
	// What was done after the run is written past a spent audit budget
	// too (Sync): a command that spent it (a flood of denied questions)
	// kept the repositories it planted out of the log. So that it cannot
	// grow the log without bound instead (a .git link costs it an inode),
	// at most maxAfterRecords of each kind are written, and then how many
	// more there were: a bound shared by every kind let a flood of one
	// (harmless named pipes) keep another (a directory that could not be
	// checked) out of the log. What could not be checked comes first, on
	// stderr too. They are written before they are told: stderr may be a
	// pipe nobody reads.
	var afterRecs []audit.Record
	var told []string
	var kinds []afterKind
	after := func(kind string, t audit.Type, p, what, detail string) {
		// The path, and a reason's, are the box's to name.
		told = append(told, fmt.Sprintf("cordon: %s%s: %s\n", what, termtext.Printable(p, 0), termtext.Printable(detail, 0)))
		if len(kinds) == 0 || kinds[len(kinds)-1].name != kind {
			kinds = append(kinds, afterKind{name: kind, t: t})
		}
		k := &kinds[len(kinds)-1]
		if k.n++; k.n > maxAfterRecords {
			return
		}
		afterRecs = append(afterRecs, audit.Record{Type: t, Path: p, Detail: detail})
	}
	for _, u := range res.Unchecked {
		after("paths not checked", audit.TypeSetAside, u.Path, "could not check ", "after the run, for repositories the sandboxed command made or changed ("+u.Reason.Error()+"); git, run there on the host, may run config or hooks the command wrote: look before you run git there")
	}
	for _, p := range res.Removed {
		after("paths removed", audit.TypeRemoved, p, "removed ", "the sandboxed command made it, and git, run on the host, would have taken config and hooks from it, or run it (a git directory's commondir, a file the repository's config includes, a hooks directory or program the config names)")
	}
	for _, p := range res.SetAside {
		why := "a repository the sandboxed command made or changed (its .git, or the HEAD of a directory git takes for a git directory), or a submodule checkout it filled or registered: its config and hooks were the command's to write, and git run on the host (a plain git status, a shell prompt that shows the branch) would run them; look at them before you rename it back"
		if slices.Contains(res.Replaced, p) {
			why = "a file kept read-only in the box (a git config that now names something new for git to run, or a program, script or hook git runs) was replaced on the host while the command ran, which took its read-only mount in the box away, so the sandboxed command may have written it since; git run on the host would run what it names: read it before you rename it back"
		} else if sandbox.IsSequencerState(p) {
			why = "a paused rebase, git am, cherry-pick or revert the sandboxed command started or changed in a repository's git directory: its todo list was the command's to write, and your next git rebase --continue (or cherry-pick --continue) would run each exec line in it with your shell, on the host; read it (git-rebase-todo, todo) before you rename it back, or drop it (git checkout your branch)"
		} else if strings.HasPrefix(filepath.Base(p), policy.ProjectFile+".") {
			why = "a project file the sandboxed command made at the root of a read-write path: a later run from a directory below it without a marker of its own would have taken the whole path for its workspace; look at it before you rename it back"
		}
		after("paths set aside", audit.TypeSetAside, p, "set aside as ", why)
	}
	for _, p := range res.GitPipes {
		after("traps removed from git directories", audit.TypeRemoved, p, "removed ", "a named pipe (FIFO), a socket, or a symbolic link, that the sandboxed command made or used in a git directory, where git reads and writes its files (HEAD, the index, a ref, a pack's index, a loose object, a ref's log, a rebase's state, a submodule's git directory): git run there on the host (a plain git status, a shell prompt that shows the branch, git log, git commit) would wait for ever on a pipe, and write through a link to wherever it leads (a ref's log appended to, the commit message replaced, in a file of yours), and has no use for any of them")
	}
	for _, h := range res.Hidden {
		after("paths hidden from git status", audit.TypeHidden, h.Path, "hidden from git status: ", hiddenWhy[h.Kind])
	}
	for _, p := range res.Closed {
		after("paths closed", audit.TypeClosed, p, "closed ", "the sandboxed command made it writable by other local users (by others, or by your group where your umask keeps the group from writing), who could have replaced or changed it: that permission is taken off it; look at what is in it before you run or build it")
	}
	for _, p := range res.Pipes {
		after("named pipes set aside", audit.TypeSetAside, p, "set aside as ", "a named pipe (FIFO) the sandboxed command made or used in the workspace, or in a read-write allow path: git (a plain git status, a shell prompt that shows the branch) waits for ever on one named .gitignore, as other programs that open it do; look at it before you rename it back")
	}
	for _, l := range res.Cgroups {
		what, why := l.Told()
		after("cgroups removed", audit.TypeRemoved, l.Path, what, why)
	}
	for _, l := range res.Boxes {
		what, why := l.Told()
		after("box inits ended", audit.TypeRemoved, l.Name(), what, why)
	}
	for _, k := range kinds {
		if n := k.n - maxAfterRecords; n > 0 {
			afterRecs = append(afterRecs, audit.Record{Type: k.t,
				Detail: fmt.Sprintf("and %d more %s after the run, each named on cordon's stderr: a run's log holds the first %d of each kind", n, k.name, maxAfterRecords)})
		}
	}
	if len(afterRecs) > 0 {
		if err := r.w.Sync(afterRecs...); err != nil {
			fmt.Fprintf(stderr, "cordon: %v\n", err)
		}
	}
	for _, msg := range told {
		io.WriteString(stderr, msg)
	}
	code := res.ExitCode
	r.print()
	msg := ""
	switch {
	case runErr != nil:
		msg = runErr.Error()
	case res.TimedOut:
		msg = r.out.Outcome.Reason
	case res.Cause != "":
		msg = fmt.Sprintf("%s (exit status %d)", res.Cause, code)
	default:
		msg = signalMessage(res.Signal, code, s.Policy.Limits.Memory)
	}
	if code == 0 && msg == "" {
		return nil
	}
	return exitError{code: code, msg: msg}
}

// hiddenWhy says, for each way a run hid a change from git status and git
// diff, what it did and how to undo it.
var hiddenWhy = map[sandbox.HiddenKind]string{
	sandbox.HiddenFlagged:        "the sandboxed command flagged its index entry skip-worktree or assume-unchanged, so git status, git diff and git diff HEAD say nothing of what is in the file (make, a test runner, would run it); cordon leaves the flag: look at the file, then git update-index --no-skip-worktree --no-assume-unchanged -- PATH",
	sandbox.HiddenUnnamed:        "the sandboxed command changed which of this repository's index entries are flagged skip-worktree or assume-unchanged, among more than cordon names, so git status and git diff may say nothing of files it changed: list them with git ls-files -v | grep '^[a-zS]' and look at each",
	sandbox.HiddenExcluded:       "the sandboxed command made or changed this exclude file, so git status lists no untracked file it names (a conftest.py, a Makefile include, that your tools would run): look at it and at the files it names (git status --ignored)",
	sandbox.HiddenIgnoring:       "the sandboxed command made or changed this .gitignore, so git status lists no untracked file it names, itself included (a '*' in it hides it and every file beside it: a conftest.py, a Makefile include, that your tools would run): look at it and at what it hides (git status --ignored)",
	sandbox.HiddenUntrackedCache: "the sandboxed command added or rewrote this repository's untracked cache (an extension of its index), from which git status takes which files are untracked without looking, so a cache it wrote can leave out a file it added (or git itself rewrote it, at a git status in the box: cordon cannot tell the two apart): review with git -c core.untrackedCache=false status --untracked-files=all, or drop the cache with git update-index --no-untracked-cache",
	sandbox.HiddenForged:         "the sandboxed command changed this file and rewrote its index entry to record the file's new status with the old object name, so git status and git diff take it for unchanged without reading it (make, a test runner, would run it): touch the file, and git status and git diff read it again and show the change",
	sandbox.HiddenAttributes:     "the sandboxed command made or changed this attributes file, which git status does not show, and whose attributes change what git diff shows of a change (-diff or binary: \"Binary files differ\"; a diff driver of your configuration: its textconv's output) and have git take a file that differs from its object for unchanged (eol, ident conversions): look at it, and review with it moved away",
	sandbox.HiddenUnverified:     "the sandboxed command rewrote this index entry (for a worktree: more entries than cordon reads again) and the file is not the object the entry names, which this repository's attributes (a filter, an end-of-line conversion) may explain, or not: cordon did not check, and git status takes the file for unchanged without reading it: touch the file (each of them: git ls-files -z | xargs -0 touch --), and git status and git diff read it again",
}

// maxAfterRecords bounds the audit lines of each kind of what was done
// after a run (afterKind): they are written whatever the session's audit
// budget (a line holds 4KiB of path and as much of detail at most).
const maxAfterRecords = 16

// afterKind is one kind of what was done after a run, as the audit
// counts it: its name in the line saying how many more there were, its
// lines' type, and how many there were.
type afterKind struct {
	name string
	t    audit.Type
	n    int
}

// signalMessage says, as a shell would, that the command was ended by
// signal sig (as bwrap reports it: exit status 128+N); nothing for none,
// and nothing for SIGINT and SIGPIPE, which the user or a closed pipe
// sent. A run with a memory limit is told what SIGKILL may mean.
func signalMessage(sig string, code int, memory int64) string {
	switch sig {
	case "", "SIGINT", "SIGPIPE":
		return ""
	}
	msg := fmt.Sprintf("the command was ended by %s (exit status %d)", sig, code)
	if sig == "SIGKILL" && memory > 0 {
		msg += "; a command over the run's memory limit (--memory) is ended this way"
	}
	return msg
}

// ended is the result of a run, and its error: those the backend
// returned, unless the run's job was stopped from the terminal, which
// ended the run (suspendedResult).
func (r *runState) ended(res sandbox.Result, runErr error) (sandbox.Result, error) {
	if r.suspended == nil || r.suspended() == 0 {
		return res, runErr
	}
	return suspendedResult(res, r.suspended()), nil
}

// exitRecord sets the outcome of a run that ended with res (runErr, when
// it never started) and returns its exit line.
func (r *runState) exitRecord(s *sandbox.Spec, res sandbox.Result, runErr error) audit.Record {
	r.out.DurationMS = res.Duration.Milliseconds()
	code := res.ExitCode
	rec := audit.Record{Type: audit.TypeExit, Command: r.argv, Workdir: s.Workdir, Network: string(s.Policy.Network),
		ExitCode: &code, Signal: res.Signal, DurationMS: res.Duration.Milliseconds()}
	switch {
	case runErr != nil:
		r.out.Outcome.Kind = "failed_to_start"
		r.out.Outcome.Reason = runErr.Error()
		rec.Detail = runErr.Error()
	case res.TimedOut:
		r.out.Outcome.Kind = "timeout"
		r.out.Outcome.Reason = fmt.Sprintf("the deadline of %s ended the process tree", s.Timeout)
	default:
		r.out.Outcome.Kind = "completed"
		r.out.Outcome.Reason = res.Cause
		rec.Detail = res.Cause
	}
	r.out.Outcome.ExitCode, r.out.Outcome.Signal = &code, res.Signal
	rec.Outcome = r.out.Outcome.Kind
	return rec
}

// illustrateSeatbelt fills what a Seatbelt launch decides only at run time
// (its per-session TMPDIR, the proxy's port) with stand-ins, so a dry run
// can render the profile from any machine.
func illustrateSeatbelt(s *sandbox.Spec) {
	dir := "/private/var/folders/cordon/dry-run/T"
	s.Env = append(s.Env, "TMPDIR="+dir, "HOME="+dir+"/home")
	if s.Policy.Network == policy.NetRestricted && s.Network == nil {
		s.Network = &sandbox.Network{ProxyURL: "http://cordon:TOKEN@127.0.0.1:3128", ProxyPort: 3128}
	}
}

// unsetEnv lists the names among those --env passes that lookup finds
// unset: the flag passes nothing for them, which the user asked for by
// name.
func unsetEnv(names []string, lookup func(string) (string, bool)) []string {
	var unset []string
	for _, n := range names {
		if _, ok := lookup(n); !ok {
			unset = append(unset, n)
		}
	}
	return unset
}
