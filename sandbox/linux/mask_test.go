//go:build linux

package linux

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestCredentialFiles(t *testing.T) {
	f := newFixture(t)
	tree := filepath.Join(f.root, "tree")
	for _, p := range []string{"a/.npmrc", "a/b/credentials", "c/.netrc", "c/.pypirc", "d/.git-credentials", "e/credentials.toml", "e/not-credentials", "f/readme"} {
		writeFile(t, filepath.Join(tree, p), "x", 0o644)
	}
	w := walker{limit: 100, deadline: time.Now().Add(time.Minute)}
	got, err := w.credentialFiles(tree)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(tree, p)
		rel = append(rel, r)
	}
	slices.Sort(rel)
	want := []string{"a/.npmrc", "a/b/credentials", "c/.netrc", "c/.pypirc", "d/.git-credentials", "e/credentials.toml"}
	if !slices.Equal(rel, want) {
		t.Fatalf("found %q, want %q", rel, want)
	}
}

func TestCredentialFilesBound(t *testing.T) {
	f := newFixture(t)
	tree := filepath.Join(f.root, "big")
	for i := range 20 {
		writeFile(t, filepath.Join(tree, fmt.Sprint(i)), "", 0o644)
	}
	w := walker{limit: 10, deadline: time.Now().Add(time.Minute)}
	if _, err := w.credentialFiles(tree); !errors.Is(err, errWalkBound) {
		t.Fatalf("err = %v, want the walk bound", err)
	}
}
