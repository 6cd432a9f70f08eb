//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The exit codes the init returns when the command does not run, as
// shells do.
const (
	ExitLaunchFailed  = 125
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// relayedSignals are passed from cordon to the init, and from the init to
// the command.
var relayedSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH,
}

// forwardedSignals are passed from the init to the command: the relayed
// ones and those sent to pid 1 from inside.
var forwardedSignals = append([]os.Signal{unix.SIGCONT, unix.SIGALRM}, relayedSignals...)

// initReport is one line the init writes on its status descriptor.
type initReport struct {
	// Started is set once the command runs.
	Started bool `json:"started,omitempty"`
	// Error and Code say why the command did not start.
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"`
	// Exit is the command's end.
	Exit *initExit `json:"exit,omitempty"`
	// Probe is the self-test's findings.
	Probe []probeResult `json:"probe,omitempty"`
}

// initExit is how the command ended.
type initExit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

// initFlags are the init's arguments.
type initFlags struct {
	statusFD   int
	rlimitData int64
	nproc      int
	exe        string
	probe      string
	exec       bool
	argv       []string
}

func parseInitFlags(args []string) (initFlags, error) {
	var f initFlags
	fset := flag.NewFlagSet(InitCommand, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.IntVar(&f.statusFD, "status-fd", -1, "descriptor for the init's reports")
	fset.Int64Var(&f.rlimitData, "rlimit-data", 0, "RLIMIT_DATA for the command")
	fset.IntVar(&f.nproc, "rlimit-nproc", 0, "RLIMIT_NPROC for the command")
	fset.StringVar(&f.exe, "exe", "", "the program to execute; empty looks argv[0] up on PATH")
	fset.StringVar(&f.probe, "probe", "", "run the self-test; the value is a host path that must be unreachable")
	fset.BoolVar(&f.exec, "exec", false, "apply the limits and exec the command in place")
	if err := fset.Parse(args); err != nil {
		return f, err
	}
	f.argv = fset.Args()
	if f.probe == "" && len(f.argv) == 0 {
		return f, errors.New("no command after --")
	}
	return f, nil
}

// Init is the sandbox's pid 1 (cordon __init ARGS): it starts the command
// with the sandbox's stdio, forwards signals to it, reaps every orphan and
// returns the command's exit status (128+N when signal N ended it), or
// ExitLaunchFailed, ExitNotExecutable or ExitNotFound when it could not
// start it. It enforces nothing else; bwrap built the box already.
func Init(args []string) int {
	f, err := parseInitFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon init: %v\n", err)
		return ExitLaunchFailed
	}
	if f.exec {
		return execLimited(f)
	}
	// The command runs as the same user in the same namespaces: without
	// this it could ptrace its init (gdb -p 1) and stop it, and with it
	// the reaping and signal forwarding. The flag resets when the init
	// execs the command, so the command itself stays debuggable.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cordon init: protect the init from ptrace: %v\n", err)
		return ExitLaunchFailed
	}
	var status *os.File
	if f.statusFD >= 0 {
		status = os.NewFile(uintptr(f.statusFD), "cordon-status")
	}
	report := func(r initReport) {
		if status != nil {
			line, _ := json.Marshal(r)
			_, _ = status.Write(append(line, '\n'))
		}
	}
	closeInherited()
	if f.probe != "" {
		report(initReport{Probe: runProbe(f.probe)})
		return 0
	}

	exe, code, err := findExecutable(f.exe, f.argv[0])
	if err != nil {
		report(initReport{Error: err.Error(), Code: code})
		return code
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append([]os.Signal{unix.SIGCHLD}, forwardedSignals...)...)

	path, argv := exe, f.argv
	if f.rlimitData > 0 || f.nproc > 0 {
		self, err := os.Executable()
		if err != nil {
			report(initReport{Error: err.Error(), Code: ExitLaunchFailed})
			return ExitLaunchFailed
		}
		path = self
		argv = []string{self, InitCommand, "--exec", "--exe", exe,
			"--rlimit-data", strconv.FormatInt(f.rlimitData, 10), "--rlimit-nproc", strconv.Itoa(f.nproc), "--"}
		argv = append(argv, f.argv...)
	}
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		code := startErrorCode(err)
		report(initReport{Error: fmt.Sprintf("start %s: %v", f.argv[0], err), Code: code})
		return code
	}
	child := proc.Pid
	_ = proc.Release()
	report(initReport{Started: true})

	for sig := range sigs {
		if sig != unix.SIGCHLD {
			_ = unix.Kill(child, sig.(unix.Signal))
			continue
		}
		if exit, done := reap(child); done {
			report(initReport{Exit: &exit})
			return exit.Code
		}
	}
	return ExitLaunchFailed
}

// reap collects every exited process; done is set once child has exited.
func reap(child int) (exit initExit, done bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return exit, done
		}
		if pid != child {
			continue
		}
		done = true
		switch {
		case ws.Exited():
			exit.Code = ws.ExitStatus()
		case ws.Signaled():
			exit.Code = 128 + int(ws.Signal())
			exit.Signal = unix.SignalName(ws.Signal())
		}
	}
}

// closeInherited marks every descriptor above stderr close-on-exec, so the
// command inherits only its stdio (not bwrap's status pipe, nor ours).
func closeInherited() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// findExecutable resolves the program to run, with the shell's exit code
// for each way that fails.
func findExecutable(exe, argv0 string) (string, int, error) {
	if exe == "" {
		p, err := exec.LookPath(argv0)
		switch {
		case err == nil:
			return p, 0, nil
		case errors.Is(err, fs.ErrPermission):
			return "", ExitNotExecutable, fmt.Errorf("%s: permission denied", argv0)
		default:
			return "", ExitNotFound, fmt.Errorf("%s: command not found in the sandbox", argv0)
		}
	}
	fi, err := os.Stat(exe)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", ExitNotFound, fmt.Errorf("%s: not found in the sandbox", exe)
	case err != nil:
		return "", ExitNotExecutable, fmt.Errorf("%s: %v", exe, err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return "", ExitNotExecutable, fmt.Errorf("%s: not executable", exe)
	}
	return exe, 0, nil
}

// startErrorCode maps an exec failure to the shell's exit code.
func startErrorCode(err error) int {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ExitLaunchFailed
	}
	switch errno {
	case unix.ENOENT:
		return ExitNotFound
	case unix.EACCES, unix.ENOEXEC, unix.EISDIR, unix.EPERM:
		return ExitNotExecutable
	}
	return ExitLaunchFailed
}

// execLimited sets the command's resource limits and executes it in place
// (the init's child, so the limits never bind the init itself).
func execLimited(f initFlags) int {
	if f.exe == "" {
		fmt.Fprintln(os.Stderr, "cordon init: --exec needs --exe")
		return ExitLaunchFailed
	}
	if f.rlimitData > 0 {
		lim := unix.Rlimit{Cur: uint64(f.rlimitData), Max: uint64(f.rlimitData)}
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &lim); err != nil {
			fmt.Fprintf(os.Stderr, "cordon: set the memory limit: %v\n", err)
			return ExitLaunchFailed
		}
	}
	if f.nproc > 0 {
		lim := unix.Rlimit{Cur: uint64(f.nproc), Max: uint64(f.nproc)}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			fmt.Fprintf(os.Stderr, "cordon: set the process limit: %v\n", err)
			return ExitLaunchFailed
		}
	}
	err := unix.Exec(f.exe, f.argv, os.Environ())
	fmt.Fprintf(os.Stderr, "cordon: start %s: %v\n", f.argv[0], err)
	return startErrorCode(err)
}
