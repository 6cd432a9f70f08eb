package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// realTempDir is a fresh temporary directory under its real name, with
// no symbolic link on the way (as cordon resolves a workspace).
func realTempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// git runs git in dir, failing the test on an error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// A real index of each version and kind git writes, with a gitlink among
// files, reads as that gitlink.
func TestGitlinks(t *testing.T) {
	for _, c := range []struct {
		name  string
		init  []string
		setup [][]string
		hash  int
	}{
		{name: "version 2", init: []string{"init", "-q"}, hash: 20},
		{name: "version 3 (extended flags)", init: []string{"init", "-q"}, setup: [][]string{{"update-index", "--skip-worktree", "b/file"}}, hash: 20},
		{name: "version 4", init: []string{"init", "-q"}, setup: [][]string{{"update-index", "--index-version", "4"}}, hash: 20},
		{name: "split", init: []string{"init", "-q"}, setup: [][]string{{"update-index", "--split-index"}, {"update-index", "--add", "--cacheinfo", "160000,{sub},z/late"}}, hash: 20},
		{name: "sha256", init: []string{"init", "-q", "--object-format=sha256"}, hash: 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := t.TempDir()
			git(t, repo, c.init...)
			for _, f := range []string{"a/file", "b/file", "c"} {
				if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(repo, f), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(t, repo, "add", ".")
			sub := git(t, repo, "hash-object", "-w", "c") // any object name will do
			git(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+sub+",a/sub")
			want := []string{"a/sub"}
			for _, s := range c.setup {
				for i := range s {
					s[i] = strings.ReplaceAll(s[i], "{sub}", sub)
				}
				git(t, repo, s...)
				if strings.Contains(strings.Join(s, " "), "z/late") {
					want = append(want, "z/late")
				}
			}
			dir := filepath.Join(repo, ".git")
			if got := hashSizeOf(dir); got != c.hash {
				t.Fatalf("hashSizeOf = %d, want %d", got, c.hash)
			}
			got, _, err := repoGitlinks(dir, time.Time{})
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("repoGitlinks = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestGitlinksRefuses(t *testing.T) {
	entry := func(mode uint32, name string) []byte {
		e := make([]byte, 62)
		e[24], e[25], e[26], e[27] = byte(mode>>24), byte(mode>>16), byte(mode>>8), byte(mode)
		e[60], e[61] = 0, byte(len(name))
		e = append(e, name...)
		for len(e)%8 != 0 || len(e) == 62+len(name) {
			e = append(e, 0)
		}
		return e
	}
	index := func(version, count byte, entries ...[]byte) []byte {
		b := []byte{'D', 'I', 'R', 'C', 0, 0, 0, version, 0, 0, 0, count}
		for _, e := range entries {
			b = append(b, e...)
		}
		return append(b, make([]byte, 20)...)
	}
	good := index(2, 1, entry(modeGitlink, "ok/sub"))
	if links, _, err := gitlinks(bytes.NewReader(good), int64(len(good)), 20); err != nil || !slices.Equal(links, []string{"ok/sub"}) {
		t.Fatalf("a well-formed index: %q, %v", links, err)
	}
	// An odd gitlink does not hide the others: they are read, and it is
	// reported.
	mixed := index(2, 2, entry(modeGitlink, "../outside"), entry(modeGitlink, "ok/sub"))
	links, _, err := gitlinks(bytes.NewReader(mixed), int64(len(mixed)), 20)
	var bad *badGitlinksError
	if !errors.As(err, &bad) || !slices.Equal(bad.paths, []string{"../outside"}) || !slices.Equal(links, []string{"ok/sub"}) {
		t.Errorf("an index with an odd gitlink: %q, %v", links, err)
	}
	for name, data := range map[string][]byte{
		"empty":            nil,
		"not an index":     []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"),
		"version 5":        index(5, 0),
		"too many entries": index(2, 200, entry(modeGitlink, "a")),
		"cut off":          good[:40],
		"parent path":      index(2, 1, entry(modeGitlink, "../outside")),
		"absolute path":    index(2, 1, entry(modeGitlink, "/etc")),
		".git in the path": index(2, 1, entry(modeGitlink, "a/.GIT/x")),
		"unclean path":     index(2, 1, entry(modeGitlink, "a//b")),
	} {
		if links, _, err := gitlinks(bytes.NewReader(data), int64(len(data)), 20); err == nil {
			t.Errorf("%s: read as %q", name, links)
		}
	}
}

// Whatever the box writes as an index, reading it neither panics nor
// yields a path outside the worktree.
func FuzzGitlinks(f *testing.F) {
	repo := f.TempDir()
	git(f, repo, "init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "c"), []byte("c"), 0o644); err != nil {
		f.Fatal(err)
	}
	git(f, repo, "add", "c")
	git(f, repo, "update-index", "--add", "--cacheinfo", "160000,"+git(f, repo, "hash-object", "-w", "c")+",a/sub")
	data, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, 20)
	git(f, repo, "update-index", "--skip-worktree", "c")
	git(f, repo, "update-index", "--index-version", "4")
	if data, err = os.ReadFile(filepath.Join(repo, ".git", "index")); err != nil {
		f.Fatal(err)
	}
	f.Add(data, 20)
	f.Fuzz(func(t *testing.T, data []byte, hash int) {
		if hash != 20 && hash != 32 {
			return
		}
		hidden := Hidden{recorded: &recordedSince{since: time.Unix(1, 0)}}
		links, _, err := readIndex(bytes.NewReader(data), int64(len(data)), hash, &hidden)
		if err != nil {
			return
		}
		hidden.done()
		if len(hidden.Paths) > min(hidden.Count, maxHiddenNamed) || (hidden.Count == 0) != (hidden.Digest == "") {
			t.Fatalf("%d flagged entries, %d named, digest %q", hidden.Count, len(hidden.Paths), hidden.Digest)
		}
		if r := hidden.recorded; len(r.entries) > maxRecorded {
			t.Fatalf("%d entries recorded since, more than %d", len(r.entries), maxRecorded)
		}
		for _, e := range hidden.recorded.entries {
			if e.path == "" || len(e.oid) != hash {
				t.Fatalf("recorded entry %q with a %d-byte object name", e.path, len(e.oid))
			}
		}
		for _, l := range links {
			if !cleanWorktreePath(l) {
				t.Fatalf("gitlink %q is no path in a worktree", l)
			}
		}
	})
}

// BenchmarkRepoGitlinks reads the index of a repository of 100,000 files,
// as every run in such a workspace does when it starts and when it ends.
func BenchmarkRepoGitlinks(b *testing.B) {
	repo := b.TempDir()
	git(b, repo, "init", "-q")
	blob := git(b, repo, "hash-object", "-w", "--stdin")
	var lines strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&lines, "100644 %s\tdir%03d/sub%02d/file%06d.go\n", blob, i%500, i%37, i)
	}
	cmd := exec.Command("git", "update-index", "--add", "--index-info")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(lines.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git update-index: %v: %s", err, out)
	}
	dir := filepath.Join(repo, ".git")
	for _, version := range []string{"2", "4"} {
		git(b, repo, "update-index", "--index-version", version)
		b.Run("version "+version, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := repoGitlinks(dir, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An index too large to be real is refused unread, and so is one that is
// no regular file.
func TestIndexGitlinksBounds(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "index")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxIndexSize + 1); err != nil { // sparse: nothing is written
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := indexGitlinks(big, 20, nil); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("an index of %d bytes: %v", maxIndexSize+1, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := indexGitlinks(link, 20, nil); err == nil {
		t.Error("an index that is a symbolic link was read")
	}
}
