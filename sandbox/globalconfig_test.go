package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The user's global git config, and what it includes, guarded where it
// lies under a directory the box may write.
func TestGuardGlobalConfig(t *testing.T) {
	type tree map[string]string // path ({home}, {ws}) -> contents; "@target" a link
	for _, c := range []struct {
		name    string
		xdg     string
		global  string // $GIT_CONFIG_GLOBAL
		tree    tree
		want    []string
		never   []string
		wantErr string
	}{
		{name: "include in the workspace", tree: tree{"{home}/.gitconfig": "[include]\n\tpath = {ws}/gitextra\n", "{ws}/gitextra": "[include]\n\tpath = more\n", "{ws}/more": ""},
			want: []string{"read-only {ws}/gitextra", "read-only {ws}/more"}},
		{name: "missing include", tree: tree{"{home}/.gitconfig": "[includeIf \"gitdir:~/x/\"]\n\tpath = {ws}/sub/gitextra\n", "{ws}/sub/": ""},
			want: []string{"unmade {ws}/sub/gitextra"}},
		{name: "a link into a dotfiles workspace", tree: tree{"{home}/.gitconfig": "@{ws}/dots/gitconfig", "{ws}/dots/gitconfig": "[include]\n\tpath = extra\n", "{ws}/dots/extra": ""},
			want: []string{"pinned {ws}/dots", "read-only {ws}/dots/gitconfig", "read-only {ws}/dots/extra"}},
		{name: "xdg config in the workspace", xdg: "{ws}/xdg", tree: tree{"{ws}/xdg/git/config": ""},
			want: []string{"pinned {ws}/xdg", "pinned {ws}/xdg/git", "read-only {ws}/xdg/git/config"}},
		{name: "a link in the workspace", xdg: "{ws}/xdg", tree: tree{"{ws}/xdg/git/config": "@{home}/real", "{home}/real": ""},
			wantErr: "is a symbolic link"},
		{name: "GIT_CONFIG_GLOBAL in the workspace", global: "{ws}/dots/gitconfig", tree: tree{"{ws}/dots/gitconfig": "[include]\n\tpath = extra\n", "{ws}/dots/extra": ""},
			want: []string{"pinned {ws}/dots", "read-only {ws}/dots/gitconfig", "read-only {ws}/dots/extra"}},
		{name: "outside", tree: tree{"{home}/.gitconfig": "[include]\n\tpath = other\n", "{home}/other": "", "{ws}/gitextra": ""},
			never: []string{"gitextra", ".gitconfig", "other"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, home := realTempDir(t), realTempDir(t)
			x := strings.NewReplacer("{ws}", ws, "{home}", home)
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", x.Replace(c.xdg))
			t.Setenv("GIT_CONFIG_GLOBAL", x.Replace(c.global))
			t.Setenv("GIT_CONFIG_SYSTEM", "")
			laid := map[string]string{}
			for p, data := range c.tree {
				laid[x.Replace(p)] = x.Replace(data)
			}
			layTree(t, "", laid)
			paths, err := guardGlobalConfig([]string{ws})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("guardGlobalConfig = %v, %v; want an error with %q", paths, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := describeGuards(paths, "")
			for _, w := range c.want {
				if w = x.Replace(w); !slices.Contains(got, w) {
					t.Errorf("guardGlobalConfig lacks %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
			for _, n := range c.never {
				for _, p := range paths {
					if strings.HasSuffix(p.Path, "/"+n) {
						t.Errorf("guardGlobalConfig guards %s:\n%s", p.Path, strings.Join(got, "\n"))
					}
				}
			}
			for _, p := range paths {
				if !Within(p.Path, ws) {
					t.Errorf("guardGlobalConfig guards %s, outside the workspace", p.Path)
				}
			}
		})
	}
}

// A file the box must not write that has other hard links on the file
// system of a directory the box may write is refused: a read-only mount
// holds one name, and the box wrote the file through another (a dotfiles
// workspace whose gitconfig ~/.gitconfig is a hard link of; a read_only
// file with a second name in the workspace).
func TestGuardHardLinked(t *testing.T) {
	ws, home := realTempDir(t), realTempDir(t)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	t.Setenv("GIT_CONFIG_SYSTEM", "")
	for p, data := range map[string]string{"dots/gitconfig": "[user]\n\tname = x\n", "Makefile": "all:\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := GuardWorkspace(GuardSpec{Workspace: ws, ReadOnly: []string{"Makefile"}}); err != nil {
		t.Fatalf("with no hard links: %v", err)
	}
	if err := os.Link(filepath.Join(ws, "Makefile"), filepath.Join(ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := GuardWorkspace(GuardSpec{Workspace: ws, ReadOnly: []string{"Makefile"}}); err == nil || !strings.Contains(err.Error(), filepath.Join(ws, "notes.txt")+" is a hard link of "+filepath.Join(ws, "Makefile")) {
		t.Errorf("a read_only file with a second name in the workspace: %v, want a refusal", err)
	}
	if err := os.Link(filepath.Join(ws, "dots", "gitconfig"), filepath.Join(home, ".gitconfig")); err != nil {
		t.Fatal(err)
	}
	// Another directory the box may write, holding no name of it, is
	// searched and passes.
	if _, err := guardGlobalConfig([]string{realTempDir(t)}); err != nil {
		t.Errorf("~/.gitconfig hard-linked outside the directories the box may write: %v", err)
	}
	if _, err := guardGlobalConfig([]string{ws}); err == nil || !strings.Contains(err.Error(), filepath.Join(ws, "dots", "gitconfig")+" is a hard link of "+filepath.Join(home, ".gitconfig")) {
		t.Errorf("~/.gitconfig a hard link of the workspace's gitconfig: %v, want a refusal", err)
	}
}

// cordon's configuration with a second name in the workspace is refused:
// the box rewrote the global config through it (a dotfiles workspace
// whose cordon config ~/.config/cordon/config.yaml is a hard link of),
// widening the next run's policy, or read the CA key.
func TestGuardConfigHardLinked(t *testing.T) {
	ws, cfg := realTempDir(t), realTempDir(t)
	config, ca := filepath.Join(cfg, "config.yaml"), filepath.Join(cfg, "ca")
	if err := os.Mkdir(ca, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{config, filepath.Join(ca, "ca-key.pem")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := GuardSpec{Workspace: ws, Config: []string{config, ca}}
	if _, err := GuardWorkspace(spec); err != nil {
		t.Fatalf("with no hard links: %v", err)
	}
	for _, f := range []string{config, filepath.Join(ca, "ca-key.pem")} {
		t.Run(filepath.Base(f), func(t *testing.T) {
			other := filepath.Join(ws, "dots-"+filepath.Base(f))
			if err := os.Link(f, other); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(other)
			if _, err := GuardWorkspace(spec); err == nil || !strings.Contains(err.Error(), other+" is a hard link of "+f) {
				t.Errorf("%s with a second name in the workspace: %v, want a refusal", f, err)
			}
		})
	}
}
