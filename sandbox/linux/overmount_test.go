//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
)

func TestOvermounts(t *testing.T) {
	tests := []struct {
		name string
		opts string
		want []overmount
	}{
		{"a guard in the workspace", "--bind /w /w --ro-bind /w/.git/config /w/.git/config",
			[]overmount{{"/w/.git/config", "/w/.git/config", "/w"}}},
		{"a tree in a tmpfs, a mask in the tree", "--tmpfs /h --ro-bind /h/.m2 /h/.m2 --ro-bind /s/empty /h/.m2/settings.xml",
			[]overmount{{"/h/.m2/settings.xml", "/h/.m2/settings.xml", "/h/.m2"}}},
		{"a bind from elsewhere", "--bind /real/w /w --ro-bind /s/empty /w/a/b",
			[]overmount{{"/real/w/a/b", "/w/a/b", "/real/w"}}},
		{"stacked at one path: the mount below's source", "--ro-bind /x /x --ro-bind /s/file-0 /x/a --ro-bind /s/empty /x/a",
			[]overmount{{"/x/a", "/x/a", "/x"}, {"/s/file-0", "/x/a", "/s/file-0"}}},
		{"the nearest mount, not the first: a tmpfs in the tree", "--bind /w /w --tmpfs /w/t --ro-bind /s/empty /w/t/f",
			[]overmount{{"/w/t", "/w/t", "/w"}}},
		{"proc and dev are no host's", "--proc /proc --dev-bind /dev/null /proc/keys --dev /dev --ro-bind /s/e /dev/x",
			nil},
		{"the new root is no host's", "--ro-bind /usr /usr --symlink usr/bin /bin --setenv A b --size 10 --tmpfs /tmp --unshare-user --chdir /w",
			nil},
		{"the system's trees: cordon's plumbing, which root replaces", "--ro-bind /etc /etc --ro-bind /s/file-0 /etc/resolv.conf --ro-bind /usr /usr --ro-bind /s/e /usr/x",
			nil},
		{"a prefix of a name is not its directory", "--bind /w /w --ro-bind /s/e /wx/y", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := overmounts(strings.Fields(tt.opts))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"--bind /a", "--overlay-src /a", "--tmpfs"} {
		if _, err := overmounts(strings.Fields(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestOvermountsOfABuiltLaunch: every option build emits is one the
// watch knows, and a repository's guard and an exposed tree's mask are
// among what it watches.
func TestOvermountsOfABuiltLaunch(t *testing.T) {
	f := newFixture(t)
	mkdirs(t, filepath.Join(f.ws, ".git", "hooks"))
	writeFile(t, filepath.Join(f.ws, ".git", "config"), "[core]\n", 0o644)
	writeFile(t, filepath.Join(f.ws, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	mkdirs(t, filepath.Join(f.ws, ".git", "objects"), filepath.Join(f.ws, ".git", "refs"))
	m2 := filepath.Join(f.home, ".m2")
	writeFile(t, filepath.Join(m2, "settings.xml"), "real", 0o644)
	p := &policy.Policy{Network: policy.NetOff, Expose: []string{m2}, DenyRead: []string{filepath.Join(m2, "settings.xml")}}
	l, err := build(f.spec(p, "true"), f.host(), f.scratch, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := overmounts(l.argv[1:l.sep])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(f.ws, ".git", "config"), filepath.Join(m2, "settings.xml")} {
		if !slices.ContainsFunc(got, func(o overmount) bool { return o.host == want }) {
			t.Errorf("%s is not watched: %v", want, got)
		}
	}
}

// TestWatchOvermounts: a watched name renamed over, removed or renamed
// away is reported, and so is a directory between the bind's root and
// it renamed (the mount moves with it); another name, the watched one
// created, or the root itself renamed (the bind moves with it) is not.
func TestWatchOvermounts(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(root, dir string) error
		lost   bool
	}{
		{"renamed over", func(_, d string) error { return os.Rename(filepath.Join(d, "new"), filepath.Join(d, "config")) }, true},
		{"removed", func(_, d string) error { return os.Remove(filepath.Join(d, "config")) }, true},
		{"renamed away", func(_, d string) error { return os.Rename(filepath.Join(d, "config"), filepath.Join(d, "old")) }, true},
		{"a directory above renamed away", func(r, _ string) error { return os.Rename(filepath.Join(r, "a"), filepath.Join(r, "a2")) }, true},
		{"the directory above it renamed away", func(_, d string) error { return os.Rename(d, d+"2") }, true},
		{"another name", func(_, d string) error { return os.Rename(filepath.Join(d, "new"), filepath.Join(d, "other")) }, false},
		{"created", func(_, d string) error { return os.WriteFile(filepath.Join(d, "absent"), nil, 0o644) }, false},
		{"the root renamed", func(r, _ string) error { return os.Rename(r, r+"2") }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			dir := filepath.Join(root, "a", "b")
			for _, n := range []string{"config", "new"} {
				writeFile(t, filepath.Join(dir, n), n, 0o644)
			}
			w, err := watchOvermounts([]overmount{{host: filepath.Join(dir, "config"), box: "/box/config", root: root}, {host: filepath.Join(dir, "absent"), box: "/box/absent", root: root}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			if err := tt.change(root, dir); err != nil {
				t.Fatal(err)
			}
			wait := 200 * time.Millisecond
			if tt.lost {
				wait = 10 * time.Second
			}
			select {
			case o := <-w.lostMount():
				if !tt.lost || o.box != "/box/config" {
					t.Errorf("reported %v", o)
				}
			case <-time.After(wait):
				if tt.lost {
					t.Error("not reported")
				}
			}
		})
	}
}
