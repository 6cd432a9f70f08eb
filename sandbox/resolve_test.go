package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestResolverAgreesWithTheKernel resolves a table of paths, links
// absolute, relative, chained, dangling and looping among them, with and
// without memory, and checks both against filepath.EvalSymlinks (which
// asks the kernel each time) and against each other, the second time
// round from memory alone: the links a walk crosses are reported each
// time, remembered or not.
func TestResolverAgreesWithTheKernel(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "home/user/.ssh"), 0o700))
	must(os.WriteFile(filepath.Join(root, "home/user/.ssh/id"), nil, 0o600))
	must(os.WriteFile(filepath.Join(root, "file"), nil, 0o600))
	must(os.Symlink(filepath.Join(root, "home"), filepath.Join(root, "abs")))
	must(os.Symlink("home/user", filepath.Join(root, "rel")))
	must(os.Symlink("rel", filepath.Join(root, "chain")))
	must(os.Symlink("nowhere", filepath.Join(root, "dangling")))
	must(os.Symlink("loop", filepath.Join(root, "loop")))
	must(os.Symlink("../..", filepath.Join(root, "home/user/up")))

	cases := []string{
		"home/user/.ssh/id",
		"home/user/.aws",
		"abs/user/.ssh",
		"rel/.ssh/id",
		"chain/.ssh",
		"chain/missing/deeper",
		"dangling",
		"dangling/below",
		"loop",
		"file/below",
		"home/user/up/file",
		"home/../file",
		"home/user/up/rel/.ssh",
	}
	var memo Resolver
	for round := range 2 {
		for _, c := range cases {
			p := filepath.Join(root, c)
			var plainLinks, memoLinks []string
			plain, plainWhole, err1 := (*Resolver)(nil).Resolve(p, func(l string) error { plainLinks = append(plainLinks, l); return nil })
			got, whole, err2 := memo.Resolve(p, func(l string) error { memoLinks = append(memoLinks, l); return nil })
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: errors %v, %v", c, err1, err2)
			}
			if got != plain || whole != plainWhole || !slices.Equal(memoLinks, plainLinks) {
				t.Errorf("round %d, %s: remembered %q %v %q, fresh %q %v %q", round, c, got, whole, memoLinks, plain, plainWhole, plainLinks)
			}
			want, wantErr := filepath.EvalSymlinks(p)
			real, err := memo.EvalSymlinks(p)
			if (err != nil) != (wantErr != nil) || real != want {
				t.Errorf("round %d, EvalSymlinks(%s) = %q, %v; the kernel's way %q, %v", round, c, real, err, want, wantErr)
			}
		}
	}
	// The second round asked nothing new: every name was remembered.
	n := len(memo.names)
	for _, c := range cases {
		memo.Resolve(filepath.Join(root, c), nil)
	}
	if len(memo.names) != n || n == 0 {
		t.Errorf("a third round looked up new names: %d remembered before, %d after", n, len(memo.names))
	}
}

// TestResolverLinkRefusalRemembered: a link the caller refuses stops the
// walk with its error, walked afresh or remembered (a refused walk is not
// remembered: the third round is from the first walk's memory still).
func TestResolverLinkRefusalRemembered(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "home/user"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("home/user", filepath.Join(root, "rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("rel", filepath.Join(root, "chain")); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	var memo Resolver
	p := filepath.Join(root, "chain/.ssh")
	if _, _, err := memo.Resolve(p, nil); err != nil {
		t.Fatal(err)
	}
	for round, r := range []*Resolver{nil, &memo, &memo} {
		var seen []string
		real, whole, err := r.Resolve(p, func(l string) error {
			seen = append(seen, l)
			if l == filepath.Join(root, "rel") {
				return refused
			}
			return nil
		})
		if err != refused || real != "" || whole {
			t.Errorf("round %d: Resolve = %q, %v, %v; want the refusal", round, real, whole, err)
		}
		if want := []string{filepath.Join(root, "chain"), filepath.Join(root, "rel")}; !slices.Equal(seen, want) {
			t.Errorf("round %d: links offered %q; want %q", round, seen, want)
		}
	}
}
