// Package sandbox defines what an operating-system sandbox backend must do
// for cordon: say whether a policy can be enforced here (the one function
// both doctor and run call), show the exact launch plan, and run a command
// under it.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
)

// Status is how well a capability can be enforced on this machine.
type Status string

// The three statuses doctor and run report.
const (
	Ready    Status = "READY"
	Degraded Status = "DEGRADED"
	Blocked  Status = "BLOCKED"
)

// Capability is one line of a doctor report.
type Capability struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Reason says what was found; Fix says exactly what to do about it.
	Reason string `json:"reason"`
	Fix    string `json:"fix,omitempty"`
}

// Report is a backend's verdict on one policy, as doctor shows it and as
// run enforces it.
type Report struct {
	Backend      string       `json:"backend"`
	Version      string       `json:"version,omitempty"`
	Capabilities []Capability `json:"capabilities"`
}

// Blocked returns the first BLOCKED capability the policy depends on, if any.
func (r Report) Blocked() (Capability, bool) {
	for _, c := range r.Capabilities {
		if c.Status == Blocked {
			return c, true
		}
	}
	return Capability{}, false
}

// Network is what the launcher provides for the restricted network mode.
type Network struct {
	// ProxyURL is the proxy as seen from inside, token included.
	ProxyURL string
	// ProxyPort is the proxy's port on the host's loopback, for a backend
	// whose sandbox reaches the host's proxy there (macOS).
	ProxyPort int
	// Serve takes the sockets a backend made inside the sandbox's own
	// network (Linux) and serves the proxy and the resolver on them for
	// the rest of the session.
	Serve func(Sockets) error
}

// Sockets are the listening sockets of a sandbox's own network, made
// inside it: only the sandbox can reach them.
type Sockets struct {
	// Proxy is where proxy-aware clients connect (HTTPS_PROXY).
	Proxy net.Listener
	// Transparent receives every other TCP connection, redirected there;
	// Dest reads where one was headed.
	Transparent net.Listener
	Dest        func(net.Conn) (netip.AddrPort, error)
	// Own are the addresses only the sandbox's network has (its
	// loopback, its gateway): a connection redirected to one is headed
	// for the sandbox itself, never for a host of the host's network.
	Own []netip.Prefix
	// DNS and DNSTCP receive every DNS query.
	DNS    net.PacketConn
	DNSTCP net.Listener
}

// Close closes every socket.
func (s Sockets) Close() {
	for _, c := range []io.Closer{s.Proxy, s.Transparent, s.DNS, s.DNSTCP} {
		if c != nil {
			c.Close()
		}
	}
}

// Spec is one command to run under a policy.
type Spec struct {
	Policy *policy.Policy
	// Argv is the command as typed; Argv[0] is looked up on the host PATH.
	Argv []string
	// Workdir is the caller's cwd; Workspace is the project root holding it.
	Workdir   string
	Workspace string
	// Env is the complete environment the command starts with.
	Env []string
	// Files are extra files to place in the sandbox, path to contents
	// (e.g. the trust bundle, resolv.conf).
	Files map[string][]byte
	// Network is set when the policy's mode is restricted.
	Network *Network
	// Timeout ends the whole process tree; zero means none.
	Timeout time.Duration
	// Config are cordon's own configuration paths this run depends on,
	// wherever they are: the global config file it read and the CA
	// directory. The command may neither read nor write them (see
	// GuardSpec.Config).
	Config []string
	// Projects are the project files read from the directories above the
	// Workspace (policy.Sources.Projects but the workspace's own): one
	// where the command may write is guarded (GuardSpec.Projects).
	Projects []string
	// Commit, when set, is called once before the command starts (the
	// sandbox may be built by then); an error stops the run before
	// anything of the command runs. cordon run records the launch here.
	Commit func() error
	// Exited, when set, may be called once with Run's result as soon as
	// the command's end is known, while the sandbox is still being torn
	// down; Run then returns the same result. cordon run records the exit
	// here, beside the teardown.
	Exited func(Result)
	// Ended, when set, may be called once the command and its sandbox
	// are gone, however they ended, and before Run waits for the last of
	// the command's output to be copied to Stdout and Stderr (when they
	// are not files): output bound for a terminal the command stopped
	// (tcflow TCOOFF) would wait there for ever. cordon run puts the
	// terminal back here, and again once Run returns.
	Ended func()

	// Sweep has the run see to what earlier runs, whose cordon was
	// killed, left outside any workspace (on Linux, their cgroups), and
	// tell of it in the Result's Care. cordon run sets it; a self-test's
	// run, whose Care nobody reads, does not.
	Sweep bool

	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Committed runs s.Commit, when set: backends call it once, just before
// the command starts.
func (s *Spec) Committed() error {
	if s.Commit == nil {
		return nil
	}
	return s.Commit()
}

// Plan is the exact launch a Spec turns into, for --dry-run.
type Plan struct {
	Argv  []string          `json:"argv"`
	Files map[string]string `json:"files,omitempty"`
}

// Result is how a sandboxed run ended.
type Result struct {
	ExitCode int
	Signal   string
	TimedOut bool
	Duration time.Duration
	// Cause says why the command ended when neither it nor the deadline
	// ended it: cordon ended the box (a command that outlived its grace
	// after a signal), or something outside killed the box's launcher.
	Cause string
	// Care is what was seen to after the run (Aftercare), and after an
	// earlier one whose cordon was killed (Collect).
	Care
}

// Care is what Aftercare did once a run had ended.
type Care struct {
	// Removed are files the command made that must not exist (Unmade
	// guards, where the backend cannot forbid them); SetAside, the new
	// names of the .git it made or changed, renamed so git no longer runs
	// there.
	Removed, SetAside []string
	// Replaced are those of SetAside that are files kept read-only that
	// were replaced on the host during the run, which took their guard in
	// the box away (a git config that names something new to run, a
	// program, script or hook git runs).
	Replaced []string
	// Pipes are the new names of the named pipes (FIFOs) the command made
	// or used in the workspace, set aside: git opens one named .gitignore
	// and waits for ever.
	Pipes []string
	// GitPipes are the named pipes the command made or used in a git
	// directory (a ref, HEAD, the index, a loose object, a ref's log, a
	// rebase's state, a submodule's git directory), and the sockets
	// and the symbolic links (but a HEAD as git makes one) it made there,
	// removed: git there would wait for ever on a pipe, and write through
	// a link (to a file or directory of the host's), and has no use for
	// any of them.
	GitPipes []string
	// Closed are the files and directories the command made in the
	// workspace with write permission for other local users
	// (WriteClosed), which was taken off them.
	Closed []string
	// Hidden are what the command hid from git status and git diff in a
	// repository of the workspace: files whose index entries it flagged
	// skip-worktree or assume-valid, an exclude file it changed (see
	// HiddenPath). They are reported, not undone.
	Hidden []HiddenPath
	// Unchecked are what could not be checked: a repository whose index
	// could not be read, a directory of the workspace that could not be
	// looked into.
	Unchecked []Unchecked
	// Cgroups are the cgroups that earlier runs, whose cordon was killed,
	// left behind (Linux), seen to.
	Cgroups []LeftCgroup
	// Boxes are the boxes that earlier runs, whose cordon was killed as
	// it started them, left behind (Linux), ended.
	Boxes []LeftBox
}

// LeftBox is the init of a box whose cordon was killed as it started it,
// ended (Linux): Pid, as the host saw it; Waiting, whether it was still
// waiting to build the box, so that nothing of the command ran.
type LeftBox struct {
	Pid     int
	Waiting bool
	// Lingers: it was killed, but had not ended when the sweep stopped
	// waiting.
	Lingers bool
}

// Told is how cordon tells of l: what was done, before its name, and why.
func (l LeftBox) Told() (what, why string) {
	what = "ended "
	if l.Lingers {
		what = "killed, but could not see end, "
	}
	if l.Waiting {
		return what, "the init of a box that a killed cordon left waiting for ever to be built, as bubblewrap leaves an init it never woke (it gives it no parent-death signal until the command starts), with no command started"
	}
	return what, "the init of a box whose cordon was killed as it let the command start (bubblewrap gives the init no parent-death signal until then): the command ran on with no deadline, no proxy and no exit line"
}

// Name is how cordon names l's init.
func (l LeftBox) Name() string { return "box init pid " + strconv.Itoa(l.Pid) }

// LeftCgroup is the cgroup of a run whose cordon was killed before it
// could remove it: Procs is how many processes of its box were still in
// it, to be killed; Err, why they could not be; Removed, whether the
// cgroup is gone (a later sweep tries again).
type LeftCgroup struct {
	Path    string
	Procs   int
	Err     error
	Removed bool
}

// Told is how cordon tells of l: what was done, before its path, and why.
func (l LeftCgroup) Told() (what, why string) {
	const killed = "(SIGKILL, out of memory, a crash)"
	if l.Procs == 0 && l.Err == nil && l.Removed {
		return "removed ", "the cgroup of an earlier run, left empty when its cordon was killed " + killed + " before it could remove it"
	}
	were := fmt.Sprintf("%d processes of an earlier run's box were", l.Procs)
	switch l.Procs {
	case 0: // gone between the sweep's look and its count
		were = "processes of an earlier run's box were"
	case 1:
		were = "1 process of an earlier run's box was"
	}
	why = were + " still in its cgroup, running on after its cordon was killed " + killed + " with no deadline, no proxy and nothing to audit them"
	switch {
	case l.Err != nil:
		return "could not end the processes left in ", why + "; they could not be killed (" + l.Err.Error() + "): end them yourself, echo 1 > " + l.Path + "/cgroup.kill"
	case !l.Removed:
		return "killed the processes left in ", why + ": killed (cgroup.kill); the cgroup is not removed yet, which a later run tries again"
	}
	return "killed the processes left in ", why + ": killed (cgroup.kill), and the cgroup removed"
}

// Add is c followed by o.
func (c Care) Add(o Care) Care {
	return Care{Removed: append(c.Removed, o.Removed...), SetAside: append(c.SetAside, o.SetAside...), Replaced: append(c.Replaced, o.Replaced...),
		Pipes: append(c.Pipes, o.Pipes...), GitPipes: append(c.GitPipes, o.GitPipes...), Closed: append(c.Closed, o.Closed...),
		Hidden: append(c.Hidden, o.Hidden...), Unchecked: append(c.Unchecked, o.Unchecked...), Cgroups: append(c.Cgroups, o.Cgroups...),
		Boxes: append(c.Boxes, o.Boxes...)}
}

// Unchecked is a repository Aftercare could not check, and why.
type Unchecked struct {
	Path   string
	Reason error
}

// SameFile reports whether a and b are files of one inode (> log 2>&1,
// one terminal on both), which one pipe then serves, keeping the order of
// what is written to them.
func SameFile(a, b any) bool {
	fa, ok := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok || !ok2 || fa == nil || fb == nil {
		return false
	}
	sa, err := fa.Stat()
	if err != nil {
		return false
	}
	sb, err := fb.Stat()
	return err == nil && os.SameFile(sa, sb)
}

// Preparer is a Backend that can start setting up a run's sandbox before
// Run, while the launcher starts the proxy and writes the launch line.
type Preparer interface {
	// Prepare starts what Run of s will need; nothing of the command
	// starts before Run. release lets go of it if Run never comes.
	Prepare(s *Spec) (release func())
}

// Backend is one operating system's sandbox.
type Backend interface {
	// Name is "bwrap" or "seatbelt".
	Name() string
	// Check reports, with real probes, whether p can be enforced here.
	Check(ctx context.Context, p *policy.Policy) Report
	// Plan renders the launch without starting anything.
	Plan(s *Spec) (*Plan, error)
	// Run starts the command and waits for it.
	Run(ctx context.Context, s *Spec) (Result, error)
}

// freshKey marks a context whose Check must probe anew.
type freshKey struct{}

// Fresh returns a context in which Check probes anew instead of reusing a
// recent verdict (cordon doctor asks for this; cordon run does not).
func Fresh(ctx context.Context) context.Context { return context.WithValue(ctx, freshKey{}, true) }

// IsFresh reports whether ctx asks Check to probe anew.
func IsFresh(ctx context.Context) bool { v, _ := ctx.Value(freshKey{}).(bool); return v }
