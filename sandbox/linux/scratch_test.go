//go:build linux

package linux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// nobody is run_as's default account, which other processes on the
// machine may run as.
const nobody = 65534

// scratchBase is a directory for a root run's scratch directory that
// other accounts can reach (t.TempDir's parent is closed to them); the
// test fails unless it runs as root, as make test does.
func scratchBase(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test lets another account at a directory; run it as root, as make test does")
	}
	base, err := os.MkdirTemp("", "cordon-scratch-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestScratchNotWrittenThroughRunAsLinks: cordon run as root lets run_as
// (default nobody), an account other processes on the machine may run
// as, read its scratch directory. Such a process, spinning on the name
// of a scratch file (the names are fixed: file-0, empty), must never get
// a symbolic link in before root writes the file: root would follow it
// and overwrite any file on the machine with the file's contents.
func TestScratchNotWrittenThroughRunAsLinks(t *testing.T) {
	base := scratchBase(t)
	victim := filepath.Join(base, "victim")
	const original = "root's own\n"
	if err := os.WriteFile(victim, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(base, "scratch")
	link := filepath.Join(scratch, "file-0")

	// The other account's process: it tries to plant the link until it
	// has, or for at most 20 seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spin := exec.CommandContext(ctx, "setpriv", "--reuid="+strconv.Itoa(nobody), "--regid="+strconv.Itoa(nobody), "--clear-groups",
		"perl", "-e", `$end = time + 20; until (symlink($ARGV[0], $ARGV[1])) { exit 1 if time > $end }`, victim, link)
	if err := spin.Start(); err != nil {
		t.Fatalf("start the other account's process: %v", err)
	}
	planted := make(chan error, 1)
	go func() { planted <- spin.Wait() }()

	l := &launch{scratch: scratch, files: map[string][]byte{link: []byte("127.0.0.1 localhost\n")}}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
		release, err := writeScratch(l, nobody, nobody)
		if err == nil {
			release()
		}
		if got, rerr := os.ReadFile(victim); rerr != nil || string(got) != original {
			t.Fatalf("after %d scratch directories, root's file %s holds %q (%v): root wrote through the other account's link (writeScratch: %v)", i+1, victim, got, rerr, err)
		}
		select {
		case <-planted:
			t.Fatalf("after %d scratch directories, the other account planted %s in one (writeScratch: %v)", i+1, link, err)
		default:
		}
		// Back to root before it is removed, so that no link goes in
		// while it is.
		if err := os.Chown(scratch, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(scratch); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-planted
}

// TestScratchRemovedWhenNotWrittenWhole: a scratch directory whose files
// could not all be written (a full disk, which another run's box can
// bring about; here a file whose directory is missing) is removed, not
// left in the temporary directory by the launch that failed.
func TestScratchRemovedWhenNotWrittenWhole(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	l := &launch{scratch: scratch, files: map[string][]byte{
		filepath.Join(scratch, "file-0"):         []byte("written\n"),
		filepath.Join(scratch, "missing", "f-1"): []byte("not\n"),
	}}
	if _, err := writeScratch(l, os.Getuid(), os.Getgid()); err == nil {
		t.Fatal("writeScratch wrote a file in a directory that does not exist")
	}
	if _, err := os.Lstat(scratch); err == nil {
		t.Errorf("the scratch directory of a failed launch is left at %s", scratch)
	}
}

// TestScratchNotRunAsOwn: cordon run as root lets run_as (default
// nobody) read its scratch directory, and no more. Were the directory
// run_as's own, any other process running as that account could replace
// a file in it (an empty file masking a secret, the hosts file, the trust
// bundle) before bwrap binds it, and the box would read what it put
// there instead.
func TestScratchNotRunAsOwn(t *testing.T) {
	base := scratchBase(t)
	scratch := filepath.Join(base, "scratch")
	file := filepath.Join(scratch, "file-0")
	l := &launch{scratch: scratch, files: map[string][]byte{file: []byte("127.0.0.1 localhost\n")}}
	release, err := writeScratch(l, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	asNobody := func(script string) (string, error) {
		out, err := exec.Command("setpriv", "--reuid="+strconv.Itoa(nobody), "--regid="+strconv.Itoa(nobody), "--clear-groups",
			"sh", "-c", script, "sh", scratch).CombinedOutput()
		return string(out), err
	}
	if out, err := asNobody(`cat "$1/file-0"`); err != nil || out != "127.0.0.1 localhost\n" {
		t.Fatalf("run_as cannot read the scratch file bwrap binds for it (%v): %q", err, out)
	}
	if out, err := asNobody(`rm -f "$1/file-0" && echo planted > "$1/file-0"`); err == nil {
		t.Fatalf("another run_as process replaced a scratch file before bwrap bound it:\n%s", out)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != "127.0.0.1 localhost\n" {
		t.Fatalf("the scratch file now holds %q (%v)", got, err)
	}
}

// TestScratchOutOfEveryBox: a run as oneself makes its scratch directory
// in cordon's cache (sandbox.ScratchParent) under the home the user
// database gives, whatever $TMPDIR and $HOME say, and
// no run's guard lets a box have that directory. In $TMPDIR (here in a
// workspace) it lay in the reach of any box that could write there,
// which swapped another run's mask for a link to a secret.
func TestScratchOutOfEveryBox(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	tmp := filepath.Join(ws, ".tmp")
	t.Setenv("TMPDIR", tmp)
	// $HOME in the workspace too: the home that counts is the user
	// database's, which every run's guard keeps from its box.
	name := scratchName(hostInfo{uid: os.Getuid(), home: filepath.Join(ws, ".home"), dbHome: home})
	parent := sandbox.ScratchParent(home)
	if filepath.Dir(name) != parent || sandbox.Within(name, ws) {
		t.Fatalf("scratch directory %s, want one in %s, not in the workspace %s", name, parent, ws)
	}
	g := newGuard([]string{home}, "", "")
	for _, p := range []string{parent, filepath.Dir(parent)} {
		if err := g.check("allow_paths", p); err == nil {
			t.Errorf("the guard lets a box have %s", p)
		}
	}
}

// TestMakeScratchParent: the directory scratch directories are made in
// is one no other account can make or remove names in (a box's account,
// for root's runs), or the launch fails saying so.
func TestMakeScratchParent(t *testing.T) {
	base := scratchBase(t)
	for i, tt := range []struct {
		name    string
		mode    os.FileMode
		owner   int
		asOther bool
		ok      bool
	}{
		{"own, private", 0o700, -1, false, true},
		{"own, group-writable", 0o770, -1, false, false},
		{"own, sticky and world-writable (/tmp)", 0o777 | os.ModeSticky, -1, true, true},
		{"own, world-writable, not sticky", 0o777, -1, true, false},
		{"another account's", 0o755, nobody, true, false},
	} {
		dir := filepath.Join(base, strconv.Itoa(i), "p")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		if tt.owner >= 0 {
			if err := os.Chown(dir, tt.owner, tt.owner); err != nil {
				t.Fatal(err)
			}
		}
		err := makeScratchParent(dir, tt.asOther)
		if (err == nil) != tt.ok {
			t.Errorf("%s: makeScratchParent = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	made := filepath.Join(base, "made", "scratch")
	if err := makeScratchParent(made, false); err != nil {
		t.Fatalf("a missing directory of one's own: %v", err)
	}
	if fi, err := os.Stat(made); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("made %s: %v, %v; want a directory of mode 0700", made, fi, err)
	}
}
