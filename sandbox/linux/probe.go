//go:build linux

package linux

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// probeResult is one finding of the init's self-test.
type probeResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// The self-test's checks, by name.
const (
	probeReadOnly   = "writes outside the workspace fail"
	probeWorkspace  = "the workspace is writable"
	probeSeccomp    = "seccomp filter answers EPERM"
	probeNoNewPrivs = "no new privileges"
	probeCaps       = "no capabilities"
	probeUserns     = "user namespaces disabled"
	probePidNS      = "own pid namespace"
	probeNetOff     = "no network interface but loopback"
)

// runProbe checks, from inside a sandbox, what bwrap was asked to build.
// outside is a host directory that is not mounted. The working directory
// is the workspace.
func runProbe(outside string) []probeResult {
	var out []probeResult
	add := func(name string, ok bool, detail string) {
		out = append(out, probeResult{Name: name, OK: ok, Detail: detail})
	}

	var wrote []string
	for _, dir := range []string{"/", "/usr", "/etc", "/run/cordon", outside} {
		p := filepath.Join(dir, "cordon-probe")
		if err := os.WriteFile(p, nil, 0o600); err == nil {
			wrote = append(wrote, p)
			_ = os.Remove(p)
		}
	}
	add(probeReadOnly, len(wrote) == 0, "wrote "+strings.Join(wrote, ", "))

	wd, _ := os.Getwd()
	p := filepath.Join(wd, fmt.Sprintf(".cordon-probe-%d", os.Getpid()))
	err := os.WriteFile(p, nil, 0o600)
	_ = os.Remove(p)
	add(probeWorkspace, err == nil, errDetail(err))

	status := procStatus("self")
	add(probeNoNewPrivs, status["NoNewPrivs"] == "1", "NoNewPrivs: "+status["NoNewPrivs"])
	add(probeCaps, status["CapEff"] == "0000000000000000" && status["CapBnd"] == "0000000000000000",
		"CapEff: "+status["CapEff"]+", CapBnd: "+status["CapBnd"])

	errno := tiocsti()
	add(probeSeccomp, status["Seccomp"] == "2" && errno == unix.EPERM,
		fmt.Sprintf("Seccomp: %s; ioctl(TIOCSTI) on /dev/null: %v", status["Seccomp"], errno))

	err = newUserns()
	add(probeUserns, err != nil, "creating a user namespace: "+fmt.Sprint(err))

	// bwrap's init is pid 1; the command (here, the self-test) is pid 2.
	add(probePidNS, os.Getpid() == 2, fmt.Sprintf("pid %d", os.Getpid()))

	ifaces, err := net.Interfaces()
	var names []string
	for _, i := range ifaces {
		names = append(names, i.Name)
	}
	add(probeNetOff, err == nil && len(names) == 1 && names[0] == "lo", "interfaces: "+strings.Join(names, ", ")+errDetail(err))
	return out
}

// newUserns tries to start a process in a new user namespace. The program
// does not exist, so a clone that succeeds fails at exec with ENOENT (and
// nothing runs); a clone the sandbox forbids fails with its own error,
// which is returned. Nil means a user namespace was created.
func newUserns() error {
	_, err := os.StartProcess("/nonexistent/cordon-userns-probe", []string{"probe"}, &os.ProcAttr{
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER},
	})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// tiocsti tries to inject a byte into /dev/null's (absent) terminal: the
// kernel says ENOTTY, the seccomp filter EPERM first.
func tiocsti() error {
	f, err := os.Open("/dev/null")
	if err != nil {
		return err
	}
	defer f.Close()
	c := byte('x')
	err = unix.IoctlSetPointerInt(int(f.Fd()), unix.TIOCSTI, int(c))
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// procStatus reads /proc/PID/status (PID may be "self") into a map.
func procStatus(pid string) map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func errDetail(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
