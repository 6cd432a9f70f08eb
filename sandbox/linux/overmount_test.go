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
			[]overmount{{"/w/.git/config", "/w/.git/config"}}},
		{"a tree in a tmpfs, a mask in the tree", "--tmpfs /h --ro-bind /h/.m2 /h/.m2 --ro-bind /s/empty /h/.m2/settings.xml",
			[]overmount{{"/h/.m2/settings.xml", "/h/.m2/settings.xml"}}},
		{"a bind from elsewhere", "--bind /real/w /w --ro-bind /s/empty /w/a/b",
			[]overmount{{"/real/w/a/b", "/w/a/b"}}},
		{"stacked at one path: the mount below's source", "--ro-bind /x /x --ro-bind /s/file-0 /x/a --ro-bind /s/empty /x/a",
			[]overmount{{"/x/a", "/x/a"}, {"/s/file-0", "/x/a"}}},
		{"the nearest mount, not the first: a tmpfs in the tree", "--bind /w /w --tmpfs /w/t --ro-bind /s/empty /w/t/f",
			[]overmount{{"/w/t", "/w/t"}}},
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
// away is reported; another name, or the watched one created, is not.
func TestWatchOvermounts(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(dir string) error
		lost   bool
	}{
		{"renamed over", func(d string) error { return os.Rename(filepath.Join(d, "new"), filepath.Join(d, "config")) }, true},
		{"removed", func(d string) error { return os.Remove(filepath.Join(d, "config")) }, true},
		{"renamed away", func(d string) error { return os.Rename(filepath.Join(d, "config"), filepath.Join(d, "old")) }, true},
		{"another name", func(d string) error { return os.Rename(filepath.Join(d, "new"), filepath.Join(d, "other")) }, false},
		{"created", func(d string) error { return os.WriteFile(filepath.Join(d, "absent"), nil, 0o644) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, n := range []string{"config", "new"} {
				writeFile(t, filepath.Join(dir, n), n, 0o644)
			}
			w, err := watchOvermounts([]overmount{{host: filepath.Join(dir, "config"), box: "/box/config"}, {host: filepath.Join(dir, "absent"), box: "/box/absent"}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			if err := tt.change(dir); err != nil {
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
