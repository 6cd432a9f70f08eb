//go:build linux

package linux

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// bubblewrap (0.8.0 to 0.11 at least) gives the box's init no
// parent-death signal until it has built the box, read the seccomp
// program and forked the command. A bwrap killed with its cordon before
// then (SIGKILL, --die-with-parent) leaves the init behind, reparented to
// the host's init, as pid 1 of a namespace nothing else will enter:
// waiting for ever on the eventfd through which bwrap would have let it
// start, or, given the go-ahead just before, running the command with no
// cordon. A killed capability check, which the next run makes again,
// left one each time. sweepOrphans ends them: the capability check does
// (every doctor, and every run that probes anew), and so does a run that
// finds a killed run's debt in its workspace, before it pays it.

// orphan is what the sweep reads of one process.
type orphan struct {
	uid int
	// comm is the process's name, and parentComm its parent's ("" when
	// the parent could not be read).
	comm, parentComm string
	// nsInit: the process is pid 1 of a pid namespace below the host's.
	nsInit bool
	// args is the command line, argv[0] left out.
	args []string
	// waiting: the process is blocked in read(2) on an eventfd, where
	// bwrap's init waits for bwrap to let it build the box, and has no
	// child (a built box's init has forked the command).
	waiting bool
}

// left says whether p is the init of a box of cordon's whose bwrap is
// gone: a bwrap launched as cordon launches (its options through --args
// fdArgs), pid 1 of its namespace, its parent no bwrap, and uid's.
func (p orphan) left(uid int) bool {
	launched := len(p.args) >= 3 && p.args[0] == "--args" && p.args[1] == strconv.Itoa(fdArgs) && p.args[2] == "--"
	return p.uid == uid && p.comm == "bwrap" && p.parentComm != "bwrap" && p.nsInit && launched
}

// readSyscallNr is read(2)'s number, as /proc/PID/syscall gives it.
var readSyscallNr = map[string]string{"amd64": "0", "arm64": "63"}

// orphanEnd bounds the wait for the inits a sweep killed to end.
const orphanEnd = 30 * time.Second

// sweepOrphans kills the orphans (see orphan) of the user uid, whom bwrap
// runs as, each through a pidfd opened
// before it is looked at, so that a pid taken over meanwhile is never
// signalled, and waits for them to end: an init ends only once every
// process of its namespace has (its command may have made it fill
// gigabytes, which take it a while to free), and until then the box
// runs on; a run's aftercare after the sweep saw a repository the box
// planted in that while, taken for the user's own.
func sweepOrphans(goarch string, uid int) []sandbox.LeftBox {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var killed []sandbox.LeftBox
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 1 {
			continue
		}
		// The owner first, one stat: most processes are others'.
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+n, &st) != nil || int(st.Uid) != uid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if p := readOrphan(n, goarch); p.left(uid) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			killed = append(killed, sandbox.LeftBox{Pid: pid, Waiting: p.waiting})
			fds = append(fds, fd)
			continue
		}
		unix.Close(fd)
	}
	deadline := time.Now().Add(orphanEnd)
	for i, fd := range fds {
		// A pidfd polls readable once its process has ended.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			left := time.Until(deadline)
			n, err := unix.Poll(pfd, int(max(left, 0).Milliseconds()))
			if n > 0 || left <= 0 || err != nil && err != unix.EINTR {
				killed[i].Lingers = n <= 0
				break
			}
		}
	}
	return killed
}

// readOrphan reads what left looks at of process pid; what cannot be
// read is left empty, which left refuses.
func readOrphan(pid, goarch string) orphan {
	status := procStatus(pid)
	ns := strings.Fields(status["NSpid"])
	p := orphan{comm: status["Name"], nsInit: len(ns) >= 2 && ns[len(ns)-1] == "1"}
	if p.comm != "bwrap" || !p.nsInit {
		return p
	}
	if uid := strings.Fields(status["Uid"]); len(uid) >= 2 {
		p.uid, _ = strconv.Atoi(uid[1])
	}
	p.parentComm = procStatus(status["PPid"])["Name"]
	dir := "/proc/" + pid
	if cmdline, err := os.ReadFile(dir + "/cmdline"); err == nil {
		if args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); len(args) > 1 {
			p.args = args[1:]
		}
	}
	sc, err := os.ReadFile(dir + "/syscall")
	if f := bytes.Fields(sc); err == nil && len(f) >= 2 && string(f[0]) == readSyscallNr[goarch] {
		if fdn, err := strconv.ParseInt(string(f[1]), 0, 64); err == nil {
			link, err := os.Readlink(dir + "/fd/" + strconv.FormatInt(fdn, 10))
			kids, kerr := os.ReadFile(dir + "/task/" + pid + "/children")
			p.waiting = err == nil && link == "anon_inode:[eventfd]" && kerr == nil && len(bytes.TrimSpace(kids)) == 0
		}
	}
	return p
}

// orphansText says, for doctor, what a sweep ended.
func orphansText(killed []sandbox.LeftBox) string {
	var b strings.Builder
	for _, l := range killed {
		what, why := l.Told()
		b.WriteString("; " + what + l.Name() + ": " + why)
	}
	return b.String()
}
