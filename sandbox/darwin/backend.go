package darwin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// sandboxExec is the launcher, always by absolute path.
const sandboxExec = "/usr/bin/sandbox-exec"

// Exit codes of a launch that never ran the command, as on Linux.
const (
	exitLaunch        = 125
	exitNotExecutable = 126
	exitNotFound      = 127
)

// nestedProbe is the smallest profile: sandbox-exec refuses even this one
// inside another sandbox.
const nestedProbe = "(version 1)(allow default)"

// backend is the Seatbelt backend. Its fields are fixed by New; tests
// point them at a stand-in launcher.
type backend struct {
	exe   string     // the sandbox-exec binary
	goos  string     // the OS Check and Plan believe they run on
	euid  func() int // the effective user id
	audit string     // the audit log the profile keeps out of reach
}

// New returns the Seatbelt backend, keeping the audit log at auditPath
// ("" for the default) out of the command's reach. It plans on every OS;
// anywhere but macOS, Check reports BLOCKED and Run refuses.
func New(auditPath string) sandbox.Backend {
	return &backend{exe: sandboxExec, goos: runtime.GOOS, euid: os.Geteuid, audit: auditPath}
}

// Name is the backend's name in reports.
func (b *backend) Name() string { return "seatbelt" }

// launchError is a launch that failed before the command ran, with the exit
// code that says so.
type launchError struct {
	code int
	err  error
}

func (e *launchError) Error() string { return e.err.Error() }
func (e *launchError) Unwrap() error { return e.err }

// Plan renders the profile and the sandbox-exec command line. On macOS the
// command is looked up first, as Run does, so the plan is the launch.
func (b *backend) Plan(s *sandbox.Spec) (*sandbox.Plan, error) {
	plan, _, err := b.plan(s)
	return plan, err
}

// plan is Plan, with the workspace's guarded paths (for sandbox.Aftercare).
func (b *backend) plan(s *sandbox.Spec) (*sandbox.Plan, []sandbox.GuardedPath, error) {
	if s == nil || len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, nil, &launchError{exitLaunch, errors.New("seatbelt: no command given")}
	}
	m, err := Detect(s, b.audit)
	if err != nil {
		return nil, nil, &launchError{exitLaunch, err}
	}
	l, err := newLayout(s, m, m.names)
	if err != nil {
		return nil, nil, &launchError{exitLaunch, err}
	}
	pr := l.rules()
	text, err := pr.render()
	if err != nil {
		return nil, nil, &launchError{exitLaunch, err}
	}
	files, err := l.files(s.Files)
	if err != nil {
		return nil, nil, &launchError{exitLaunch, err}
	}
	argv := slices.Clone(s.Argv)
	if b.goos == "darwin" {
		if argv[0], err = findCommand(s, pr); err != nil {
			return nil, nil, err
		}
	}
	return &sandbox.Plan{
		Argv:  append([]string{b.exe, "-p", text, "--"}, argv...),
		Files: files,
	}, m.Guarded, nil
}

// files checks that each of the Spec's files lies in the session's TMPDIR:
// macOS has no private mounts, so cordon writes them on the host.
func (l *layout) files(in map[string][]byte) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for p, data := range in {
		got, err := l.names(p)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", p, err)
		}
		if !slices.ContainsFunc(l.tmpdir, func(t string) bool { return sandbox.Within(got[0], t) && got[0] != t }) {
			return nil, fmt.Errorf("file %s: macOS has no private mounts, so cordon writes the sandbox's files on the host; put it under the session's TMPDIR %s", p, l.tmpdir[0])
		}
		out[p] = string(data)
	}
	return out, nil
}

// findCommand looks the command up as execvp will, on the PATH of its own
// environment, and returns its path. It fails with exit code 127 when there
// is none, and 126 when it is not executable or the profile will not let
// the sandbox read it.
func findCommand(s *sandbox.Spec, pr profile) (string, error) {
	name := s.Argv[0]
	var candidates []string
	if strings.Contains(name, "/") {
		candidates = []string{name}
	} else {
		search, ok := lookupEnv(s.Env, "PATH")
		if !ok {
			search = "/usr/bin:/bin" // execvp's default
		}
		for _, dir := range filepath.SplitList(search) {
			if dir == "" {
				dir = "."
			}
			candidates = append(candidates, filepath.Join(dir, name))
		}
	}
	for _, c := range candidates {
		if !filepath.IsAbs(c) {
			c = filepath.Join(workdir(s), c)
		}
		fi, err := os.Stat(c)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			return "", &launchError{exitNotExecutable, fmt.Errorf("%s is not executable; chmod +x it", c)}
		}
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			return "", &launchError{exitNotExecutable, fmt.Errorf("resolve %s: %w", c, err)}
		}
		rc, err := canonical(real)
		if err != nil || !pr.decide("file-read-data", rc) {
			return "", &launchError{exitNotExecutable, fmt.Errorf("%s (%s) is outside what the sandbox may read; add its directory to expose", c, real)}
		}
		return c, nil
	}
	return "", &launchError{exitNotFound, fmt.Errorf("command %q not found on the PATH of its environment", name)}
}

// workdir is where the command starts: the Spec's workdir, else the
// workspace.
func workdir(s *sandbox.Spec) string {
	if s.Workdir != "" {
		return s.Workdir
	}
	return s.Workspace
}

// Check reports, with real probes, whether p can be enforced here. Run
// calls it too, so doctor and run cannot disagree.
func (b *backend) Check(ctx context.Context, p *policy.Policy) sandbox.Report {
	rep := sandbox.Report{Backend: b.Name()}
	block := func(name, reason, fix string) sandbox.Report {
		rep.Capabilities = append(rep.Capabilities, sandbox.Capability{Name: name, Status: sandbox.Blocked, Reason: reason, Fix: fix})
		return rep
	}
	ready := func(name, reason string) {
		rep.Capabilities = append(rep.Capabilities, sandbox.Capability{Name: name, Status: sandbox.Ready, Reason: reason})
	}
	if p == nil {
		return block("policy", "no policy given", "load a policy before checking it")
	}
	if b.goos != "darwin" {
		return block("seatbelt", "Seatbelt is macOS's sandbox and this is "+b.goos,
			"run on macOS; cordon run --dry-run --target darwin shows the macOS launch from here")
	}
	rep.Version = osVersion()
	if fi, err := os.Stat(b.exe); err != nil || fi.Mode()&0o111 == 0 {
		return block("sandbox-exec", fmt.Sprintf("%s is missing or not executable", b.exe),
			"it ships with every macOS: restore it from a macOS reinstall")
	}
	ready("sandbox-exec", b.exe+" is present")
	if uid := b.euid(); uid == 0 {
		return block("user", "cordon is running as root, and a root process in Seatbelt still owns the machine's files",
			"run cordon as your own user, without sudo")
	}
	ready("user", "not running as root")
	if out, err := runProbe(ctx, b.exe, nestedProbe); err != nil {
		if strings.Contains(out, "Operation not permitted") {
			return block("nesting", "cordon is already inside a Seatbelt sandbox: sandbox-exec cannot apply a profile ("+strings.TrimSpace(out)+")",
				"run cordon from an ordinary terminal, not from inside another sandboxed tool or app")
		}
		return block("nesting", fmt.Sprintf("%s failed its probe: %v: %s", b.exe, err, strings.TrimSpace(out)),
			fmt.Sprintf("run %s -p '%s' /usr/bin/true to see why", b.exe, nestedProbe))
	}
	ready("nesting", "sandbox-exec applies a profile here")
	text, err := probeProfile(p)
	if err != nil {
		return block("profile", err.Error(), "change the policy as the reason says")
	}
	if out, err := runProbe(ctx, b.exe, text); err != nil {
		return block("profile", fmt.Sprintf("this macOS refused the profile for this policy: %v: %s", err, strings.TrimSpace(out)),
			"report it with the output of cordon run --dry-run --target darwin")
	}
	ready("profile", "the profile for this policy compiles and runs /usr/bin/true")
	rep.Capabilities = append(rep.Capabilities, policyCapabilities(p)...)
	return rep
}

// probeProfile renders p for a stand-in session: a directory in the user's
// temporary directory as workspace and TMPDIR (it need not exist), and any
// port for the proxy, since the probe connects nowhere.
func probeProfile(p *policy.Policy) (string, error) {
	tmp := filepath.Join(os.TempDir(), "cordon-probe")
	s := &sandbox.Spec{Policy: p, Argv: []string{"/usr/bin/true"}, Workspace: tmp, Workdir: tmp, Env: []string{"TMPDIR=" + tmp}}
	if p.Network == policy.NetRestricted {
		s.Network = &sandbox.Network{ProxyPort: 1}
	}
	m, err := Detect(s, "")
	if err != nil {
		return "", err
	}
	return Render(s, m)
}

// Run checks p with Check, writes the Spec's files into TMPDIR and runs the
// command under sandbox-exec. A launch that fails before the command runs
// returns an error and exit code 125 (126 not executable, 127 not found);
// after that, the error is nil and the exit code is the command's.
func (b *backend) Run(ctx context.Context, s *sandbox.Spec) (sandbox.Result, error) {
	if s == nil || s.Policy == nil {
		return sandbox.Result{ExitCode: exitLaunch}, errors.New("seatbelt: no policy given")
	}
	if c, blocked := b.Check(ctx, s.Policy).Blocked(); blocked {
		// A probe ended by ctx failed for want of time, not for the profile.
		if err := ctx.Err(); err != nil {
			return sandbox.Result{ExitCode: exitLaunch}, fmt.Errorf("seatbelt: the run ended while its policy was checked, before anything started: %w", err)
		}
		return sandbox.Result{ExitCode: exitLaunch}, fmt.Errorf("seatbelt cannot enforce this policy here: %s: %s; fix: %s", c.Name, c.Reason, c.Fix)
	}
	// What an earlier run, whose cordon was killed, left unchecked is
	// seen to first: planned on, it would be guarded as the user's own.
	var owed sandbox.Care
	ws, wsErr := filepath.EvalSymlinks(s.Workspace)
	if wsErr == nil {
		owed = sandbox.Collect(ws, nil)
	}
	plan, guarded, err := b.plan(s)
	if err != nil {
		var le *launchError
		if errors.As(err, &le) {
			return sandbox.Result{ExitCode: le.code}, err
		}
		return sandbox.Result{ExitCode: exitLaunch}, err
	}
	if err := placeFiles(s, plan.Files); err != nil {
		return sandbox.Result{ExitCode: exitLaunch}, err
	}
	paid := func() {}
	if wsErr == nil {
		paid, _ = sandbox.Owe(ws, guarded)
	}
	res, err := launch(ctx, s, plan)
	res.Care = owed.Add(sandbox.Aftercare(guarded))
	paid()
	return res, err
}

// placeFiles creates TMPDIR and writes the Spec's files into it, readable
// by the user only.
func placeFiles(s *sandbox.Spec, files map[string]string) error {
	tmp, _ := lookupEnv(s.Env, "TMPDIR")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("create TMPDIR %s: %w", tmp, err)
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}
