//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f fixture) (argv0 string)
		// exe and mounts may use {root}, {ws} and {home}.
		exe     string
		mounts  []string
		wantErr string
	}{
		{
			name:  "system command needs no mount",
			setup: func(t *testing.T, f fixture) string { return "sh" },
			exe:   "/usr/bin/sh",
		},
		{
			name: "tool in a bin directory mounts its prefix",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.root, "opt", "node", "bin", "node"), "\x7fELF", 0o755)
				return "node"
			},
			exe:    "{root}/opt/node/bin/node",
			mounts: []string{"{root}/opt/node"},
		},
		{
			name: "symlink on PATH is followed to the real file",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.root, "opt", "go", "bin", "go"), "\x7fELF", 0o755)
				symlink(t, filepath.Join(f.root, "opt", "go", "bin", "go"), filepath.Join(f.root, "links", "go"))
				return "go"
			},
			exe:    "{root}/opt/go/bin/go",
			mounts: []string{"{root}/opt/go"},
		},
		{
			name: "tool outside a bin directory mounts its directory",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.root, "apps", "tool"), "\x7fELF", 0o755)
				return "tool"
			},
			exe:    "{root}/apps/tool",
			mounts: []string{"{root}/apps"},
		},
		{
			name: "script interpreter is followed one level",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.root, "interp", "bin", "py"), "#!/elsewhere/never-followed\n", 0o755)
				writeFile(t, filepath.Join(f.root, "apps", "script"), "#!"+filepath.Join(f.root, "interp", "bin", "py")+" -u\nprint(1)\n", 0o755)
				return "script"
			},
			exe:    "{root}/apps/script",
			mounts: []string{"{root}/apps", "{root}/interp"},
		},
		{
			name: "env interpreter resolves its program on PATH",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.root, "opt", "node", "bin", "node"), "\x7fELF", 0o755)
				writeFile(t, filepath.Join(f.root, "apps", "cli"), "#!/usr/bin/env node\n", 0o755)
				return "cli"
			},
			exe:    "{root}/apps/cli",
			mounts: []string{"{root}/apps", "{root}/opt/node"},
		},
		{
			name: "command in the workspace adds no mount and its #! is not followed",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.ws, "bin", "run"), "#!"+filepath.Join(f.root, "apps", "x")+"\n", 0o755)
				writeFile(t, filepath.Join(f.root, "apps", "x"), "", 0o755)
				return filepath.Join(f.ws, "bin", "run")
			},
			exe: "{ws}/bin/run",
		},
		{
			name: "symlink from PATH into the workspace adds no mount",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.ws, "evil"), "\x7fELF", 0o755)
				symlink(t, filepath.Join(f.ws, "evil"), filepath.Join(f.root, "links", "evil"))
				return "evil"
			},
			exe: "{ws}/evil",
		},
		{
			name:  "relative path is left to the sandbox",
			setup: func(t *testing.T, f fixture) string { return "./build.sh" },
		},
		{
			name:  "unknown command is left to the sandbox",
			setup: func(t *testing.T, f fixture) string { return "no-such-command-xyz" },
		},
		{
			name: "command in a protected directory is refused",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.home, ".ssh", "helper"), "\x7fELF", 0o755)
				symlink(t, filepath.Join(f.home, ".ssh", "helper"), filepath.Join(f.root, "links", "helper"))
				return "helper"
			},
			wantErr: "holds credentials",
		},
		{
			name: "home bin directory mounts itself, not home",
			setup: func(t *testing.T, f fixture) string {
				writeFile(t, filepath.Join(f.home, "bin", "mine"), "\x7fELF", 0o755)
				symlink(t, filepath.Join(f.home, "bin", "mine"), filepath.Join(f.root, "links", "mine"))
				return "mine"
			},
			exe:    "{home}/bin/mine",
			mounts: []string{"{home}/bin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			argv0 := tt.setup(t, f)
			r := resolver{
				path:      strings.Join([]string{"relative/bin", filepath.Join(f.root, "links"), filepath.Join(f.root, "opt", "go", "bin"), filepath.Join(f.root, "opt", "node", "bin"), filepath.Join(f.root, "apps"), "/usr/bin", "/bin"}, ":"),
				workdir:   f.ws,
				workspace: f.ws,
				guard:     newGuard([]string{f.home}, f.audit, ""),
				visible: func(p string) bool {
					return sandbox.Within(p, "/usr") || sandbox.Within(p, "/bin") || sandbox.Within(p, f.ws)
				},
			}
			c, err := r.lookup(argv0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rep := strings.NewReplacer("{root}", f.root, "{ws}", f.ws, "{home}", f.home)
			if want := rep.Replace(tt.exe); c.Exe != want {
				// /usr/bin/sh may be a symlink to dash or bash.
				if !(tt.exe == "/usr/bin/sh" && strings.HasPrefix(c.Exe, "/usr/bin/")) {
					t.Errorf("Exe = %q, want %q", c.Exe, want)
				}
			}
			var want []string
			for _, m := range tt.mounts {
				want = append(want, rep.Replace(m))
			}
			if !slices.Equal(c.Mounts, want) {
				t.Errorf("Mounts = %q, want %q", c.Mounts, want)
			}
		})
	}
}

func TestShebang(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		body string
		want []string
	}{
		{"#!/bin/sh\n", []string{"/bin/sh"}},
		{"#! /usr/bin/env -S node --x\n", []string{"/usr/bin/env", "node"}},
		{"#!/usr/bin/python3 -u", []string{"/usr/bin/python3"}},
		{"#!relative\n", nil},
		{"#!\n", nil},
		{"echo hi\n", nil},
		{"", nil},
	}
	for i, tt := range tests {
		p := filepath.Join(dir, strings.Repeat("s", i+1))
		writeFile(t, p, tt.body, 0o755)
		if got := shebang(p); !slices.Equal(got, tt.want) {
			t.Errorf("shebang(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

// TestUnrunnable: a command that cannot be executed is answered as a shell
// answers, 127 not found and 126 not executable, from the host's view.
func TestUnrunnable(t *testing.T) {
	const nobody = 65534
	tests := []struct {
		name  string
		setup func(t *testing.T, f fixture) (argv0 string)
		// uid runs the command; 0 means cordon's own.
		uid int
		// self says the box holds cordon's binary at selfPath.
		self bool
		code int
		msg  string
	}{
		{name: "system command", setup: func(t *testing.T, f fixture) string { return "sh" }},
		{name: "cordon's own binary in the sandbox", setup: func(t *testing.T, f fixture) string { return selfPath }, self: true},
		{name: "cordon's own binary where the box has none", setup: func(t *testing.T, f fixture) string { return selfPath },
			code: 127, msg: selfPath + ": no such file"},
		{name: "not on PATH", setup: func(t *testing.T, f fixture) string { return "no-such-command-xyz" },
			code: 127, msg: "no-such-command-xyz: command not found"},
		{name: "relative and missing", setup: func(t *testing.T, f fixture) string { return "./build.sh" },
			code: 127, msg: "./build.sh: no such file"},
		{name: "relative and executable", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.ws, "build.sh"), "#!/bin/sh\n", 0o755)
			return "./build.sh"
		}},
		{name: "not executable", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.ws, "notes.txt"), "hello\n", 0o644)
			return "./notes.txt"
		}, code: 126, msg: "./notes.txt: permission denied (not executable)"},
		{name: "a directory", setup: func(t *testing.T, f fixture) string {
			mkdirs(t, filepath.Join(f.ws, "src"))
			return filepath.Join(f.ws, "src")
		}, code: 126, msg: "is a directory"},
		{name: "missing interpreter", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.ws, "run"), "#!/nonexistent/python9\n", 0o755)
			return "./run"
		}, code: 127, msg: "./run: bad interpreter /nonexistent/python9: no such file"},
		{name: "workspace script whose interpreter the sandbox lacks", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.root, "pyenv", "python"), "\x7fELF", 0o755)
			writeFile(t, filepath.Join(f.ws, "tool.py"), "#!"+filepath.Join(f.root, "pyenv", "python")+"\n", 0o755)
			return "./tool.py"
		}, code: 127, msg: "not in the sandbox; expose its directory"},
		{name: "dangling symlink", setup: func(t *testing.T, f fixture) string {
			symlink(t, filepath.Join(f.root, "gone"), filepath.Join(f.ws, "tool"))
			return filepath.Join(f.ws, "tool")
		}, code: 127, msg: "no such file"},
		{name: "run_as without the owner's bit", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.root, "apps", "mine"), "\x7fELF", 0o700)
			return "mine"
		}, uid: nobody, code: 126, msg: "mine: permission denied (not executable)"},
		{name: "run_as with the others' bit", setup: func(t *testing.T, f fixture) string {
			writeFile(t, filepath.Join(f.root, "apps", "shared"), "\x7fELF", 0o755)
			return "shared"
		}, uid: nobody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			argv0 := tt.setup(t, f)
			r := resolver{
				path:      strings.Join([]string{filepath.Join(f.root, "apps"), "/usr/bin", "/bin"}, ":"),
				workdir:   f.ws,
				workspace: f.ws,
				guard:     newGuard([]string{f.home}, f.audit, ""),
				visible: func(p string) bool {
					return sandbox.Within(p, "/usr") || sandbox.Within(p, "/bin") || sandbox.Within(p, f.ws)
				},
				self: tt.self,
			}
			c, err := r.lookup(argv0)
			if err != nil {
				t.Fatal(err)
			}
			uid, gid := os.Geteuid(), os.Getegid()
			if tt.uid != 0 {
				uid, gid = tt.uid, tt.uid
			}
			got := r.unrunnable(argv0, c, uid, gid)
			switch {
			case tt.code == 0 && got != nil:
				t.Fatalf("refused: %d %s", got.code, got.msg)
			case tt.code == 0:
			case got == nil:
				t.Fatalf("accepted; want %d", tt.code)
			case got.code != tt.code || !strings.Contains(got.msg, tt.msg):
				t.Fatalf("got %d %q, want %d %q", got.code, got.msg, tt.code, tt.msg)
			}
		})
	}
}
