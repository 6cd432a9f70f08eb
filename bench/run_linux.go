package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// testUser runs the sandbox when the benchmark runs as root.
const testUser = "cordontest"

// timeBin is GNU time, which reports the peak RSS of the command it runs.
const timeBin = "/usr/bin/time"

// runTimeout bounds one timed command.
const runTimeout = 30 * time.Second

// cordonRunSection times bare bwrap against cordon run with the network
// off and restricted (and plain true, the runner's own share), n runs each
// after one warm-up, interleaved, as the unprivileged test user when
// running as root.
func cordonRunSection(w io.Writer, bin string, n int, progress io.Writer) {
	fmt.Fprintf(w, "\n## cordon run start-up\n\n")
	bin, err := filepath.Abs(bin)
	if err != nil {
		fmt.Fprintf(w, "not available: %v\n", err)
		return
	}
	base, err := os.MkdirTemp("", "cordon-bench-run-")
	if err != nil {
		fmt.Fprintf(w, "not available: %v\n", err)
		return
	}
	defer os.RemoveAll(base)
	home, ws, auditDir := filepath.Join(base, "home"), filepath.Join(base, "workspace"), filepath.Join(base, "audit")
	cordon := func(mode string) *launch {
		return &launch{name: "cordon run --net " + mode + " -- true",
			argv: []string{bin, "run", "--net", mode, "--audit", filepath.Join(auditDir, mode+".jsonl"), "--", "true"}}
	}
	bare := []string{"bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"}
	bwrap, floor := &launch{name: strings.Join(bare, " "), argv: bare}, &launch{name: "floor: a Go program that starts that bwrap and waits"}
	off, restricted := cordon("off"), cordon("restricted")
	ls := []*launch{bwrap, floor, off, restricted,
		{name: "true", argv: []string{"true"}}, // the runner's own share of every figure
	}
	if err := ensureBinary(bin); err != nil {
		off.unavailable, restricted.unavailable = err.Error(), err.Error()
	}
	if argv, err := floorArgv(filepath.Join(base, "floor"), bare); err != nil {
		floor.unavailable = err.Error()
	} else {
		floor.argv = argv
	}
	r, who, err := newRunner(base, home, ws, auditDir)
	if err == nil {
		_, err = os.Stat(timeBin)
		if err != nil {
			err = fmt.Errorf("GNU time is needed to read the peak RSS (apt-get install time): %w", err)
		}
	}
	if err != nil {
		for _, l := range ls {
			l.unavailable = err.Error()
		}
	}
	fmt.Fprintf(w, "Each command ran %d times after one warm-up, the five interleaved (the first rotates), as %s, with a fresh HOME and an empty workspace directory; the cordon runs write their audit log outside it (--audit). Wall time is from starting the command to reaping it. Peak RSS is the wait4 ru_maxrss of the command's process, which also covers the descendants it reaped (the largest one counts). It is read by GNU time (%s), whose fork starts from a 1 MiB process: a child forked straight from this benchmark inherits the benchmark's own RSS high-water mark at exec and would report that instead. GNU time's own start and exit count in every wall time alike: the last row, plain `true`, is that share. The floor row is bench/floor, a Go program of some twenty lines that forks bwrap with the bare argv above and waits for it: what any launcher written in Go pays before doing anything of its own.\n\n", n, who, timeBin)
	for _, l := range ls {
		if l.unavailable != "" {
			continue
		}
		if _, _, err := r.run(l.argv); err != nil {
			l.unavailable = err.Error()
		}
	}
	for i := range n {
		if i%5 == 0 {
			fmt.Fprintf(progress, "bench: cordon run timings %d/%d\n", i, n)
		}
		for j := range ls {
			l := ls[(i+j)%len(ls)]
			if l.unavailable != "" {
				continue
			}
			wall, rss, err := r.run(l.argv)
			if err != nil {
				l.unavailable = fmt.Sprintf("run %d: %v", i+1, err)
				continue
			}
			l.walls, l.rss = append(l.walls, wall), append(l.rss, rss)
		}
	}
	runTable(w, ls)
	runRatios(w, bwrap, floor, off, restricted)
}

// floorArgv builds bench/floor at path and returns its command line for
// bare: bwrap found on PATH, by its absolute path, then bare's arguments.
func floorArgv(path string, bare []string) ([]string, error) {
	bwrap, err := exec.LookPath(bare[0])
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", path, "./bench/floor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %s", path, firstLine(string(out)+"\n"+err.Error()))
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return nil, fmt.Errorf("build %s: %w", path, err)
	}
	return append([]string{path, bwrap}, bare[1:]...), nil
}

// ensureBinary builds cordon at bin if nothing is there.
func ensureBinary(bin string) error {
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", bin, err)
	}
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/cordon").CombinedOutput()
	if err != nil {
		return fmt.Errorf("build %s: %s", bin, firstLine(string(out)+"\n"+err.Error()))
	}
	return nil
}

// runner starts commands in the workspace with a fixed environment, as
// the test user when the benchmark is root.
type runner struct {
	dir string
	// rssDir receives GNU time's reports.
	rssDir string
	env    []string
	cred   *syscall.Credential
}

// newRunner makes the run's directories, owned by whoever runs the
// commands, and says who that is.
func newRunner(base, home, ws, auditDir string) (*runner, string, error) {
	r := &runner{dir: ws, rssDir: filepath.Join(base, "rss"), env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C"}}
	who := "the current user"
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup(testUser)
		if err != nil {
			return nil, "root (refused)", fmt.Errorf("running as root and there is no user %s to run the sandbox as: %w", testUser, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		r.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		r.env = append(r.env, "USER="+testUser, "LOGNAME="+testUser)
		who = "user " + testUser
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, who, fmt.Errorf("prepare %s: %w", base, err)
	}
	for _, d := range []string{home, ws, auditDir, r.rssDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, who, fmt.Errorf("prepare %s: %w", d, err)
		}
		if err := os.Lchown(d, uid, gid); err != nil {
			return nil, who, fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	return r, who, nil
}

// command prepares argv in the workspace, with the runner's environment
// and extra, as the runner's user, in a process group of its own.
func (r *runner) command(ctx context.Context, argv []string, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = r.dir, append(slices.Clone(r.env), extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred, Setpgid: true}
	return cmd
}

// run starts argv under GNU time, waits for it, and returns the wall time
// and the peak RSS in bytes; a failure is the first line the command
// printed.
func (r *runner) run(argv []string) (time.Duration, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var out bytes.Buffer
	rssFile := filepath.Join(r.rssDir, "maxrss")
	cmd := r.command(ctx, append([]string{timeBin, "-f", "%M", "-o", rssFile}, argv...))
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		msg := firstLine(out.String())
		if msg == "" || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = err.Error()
		}
		return 0, 0, errors.New(msg)
	}
	report, err := os.ReadFile(rssFile)
	if err != nil {
		return 0, 0, fmt.Errorf("GNU time's report: %w", err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(report)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("GNU time's report %q: want the peak RSS in KiB", strings.TrimSpace(string(report)))
	}
	return wall, kib << 10, nil
}
