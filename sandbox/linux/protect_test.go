//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestGuardCheck(t *testing.T) {
	f := newFixture(t)
	symlink(t, f.home, filepath.Join(f.root, "home-link"))
	cache := filepath.Join(f.root, "xdg-cache", "cordon")
	g := newGuard([]string{filepath.Join(f.root, "home-link"), ""}, f.audit, cache)
	shared := filepath.Join(f.root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string // "" means allowed
	}{
		{f.home, "your home directory"},
		{filepath.Join(f.root, "home-link"), "your home directory"},
		{f.root, "contains your home directory"},
		{"/", "contains your home directory"},
		{filepath.Join(f.home, ".ssh"), "holds credentials"},
		{filepath.Join(f.home, ".ssh", "id_ed25519"), "holds credentials"},
		{filepath.Join(f.home, ".gnupg"), "holds credentials"},
		{filepath.Join(f.home, ".aws", "credentials"), "holds credentials"},
		{filepath.Join(f.home, ".kube"), "holds credentials"},
		{filepath.Join(f.home, ".docker", "config.json"), "holds credentials"},
		{filepath.Join(f.home, ".config", "gh"), "holds credentials"},
		{filepath.Join(f.home, ".config", "cordon", "config.yaml"), "cordon's own directory at its default place"},
		{filepath.Join(f.home, ".local", "share", "cordon"), "cordon's own directory at its default place"},
		{filepath.Join(f.home, ".local", "share", "keyrings"), "holds credentials"},
		{filepath.Join(f.home, ".local", "share", "kwalletd"), "holds credentials"},
		{filepath.Join(f.home, ".mozilla"), "holds credentials"},
		{filepath.Join(f.home, ".mozilla", "firefox", "abc.default"), "holds credentials"},
		{filepath.Join(f.home, ".thunderbird"), "holds credentials"},
		{filepath.Join(f.home, ".config", "google-chrome"), "holds credentials"},
		{filepath.Join(f.home, ".config", "chromium", "Default"), "holds credentials"},
		{filepath.Join(f.home, ".config", "BraveSoftware"), "holds credentials"},
		{filepath.Join(f.home, ".config", "microsoft-edge"), "holds credentials"},
		{filepath.Join(f.home, ".config", "vivaldi"), "holds credentials"},
		{filepath.Join(f.home, ".local", "share"), ""},
		{filepath.Join(f.home, ".cache", "cordon", "bundles"), "cordon's own directory at its default place"},
		{filepath.Join(f.home, ".cache"), ""},
		{cache, "cordon's cache directory"},
		{filepath.Join(cache, "bundles", "x.pem"), "cordon's cache directory"},
		{filepath.Dir(cache), ""},
		{filepath.Dir(f.audit), "audit log directory"},
		{f.audit, "audit log directory"},
		{filepath.Join(f.home, ".config"), ""},
		{filepath.Join(f.home, ".cargo"), ""},
		{filepath.Join(f.home, ".sshx"), ""},
		{filepath.Join(f.root, "work"), ""},
		{"/opt", ""},
		// The host's views of its processes: the box has its own.
		{"/proc", "refusing the host's /proc"},
		{"/proc/1/root", "refusing the host's /proc"},
		{"/dev", "refusing the host's /dev"},
		{"/dev/pts/0", "refusing the host's /dev/pts"},
		{"/dev/shm", "refusing the host's /dev/shm"},
		{"/sys/fs/cgroup/user.slice", "refusing the host's /sys/fs/cgroup"},
		{"/dev/kvm", ""},
		{"/sys", ""}, // its cgroups are hidden in it
		// A directory every user may make files in holds the user's
		// sockets (tmux's): read-only or not, the box could connect.
		{"/var/tmp", "every user may make files in"},
		{shared, "every user may make files in"},
		{filepath.Join(shared, "data"), ""},
		{"/var", ""}, // its tmp is hidden in it
	}
	for _, v := range append(hostViews, "/tmp", "/var/tmp") {
		if !slices.Contains(g.protected(), v) {
			t.Errorf("%s is refused but not hidden inside a wider exposed directory", v)
		}
	}
	for _, tt := range tests {
		err := g.check("expose", tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("check(%s) = %v, want allowed", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("check(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
}

// An audit log that is a symlink is written where it points, so the
// directory it points into is as protected as the one it is named in.
func TestGuardFollowsAuditSymlink(t *testing.T) {
	f := newFixture(t)
	logs := filepath.Join(f.ws, "logs")
	mkdirs(t, logs)
	link := filepath.Join(f.home, "audit-link.jsonl")
	symlink(t, filepath.Join(logs, "audit.jsonl"), link)
	g := newGuard([]string{f.home}, link, "")
	for _, p := range []string{logs, filepath.Join(logs, "audit.jsonl"), f.home} {
		if err := g.check("expose", p); err == nil {
			t.Errorf("check(%s) allowed it; the log %s points into %s", p, link, logs)
		}
	}
	if !slices.Contains(g.protected(), logs) {
		t.Errorf("protected() = %v, want it to hold %s, where the log is written", g.protected(), logs)
	}
	if err := g.check("expose", f.ws); err != nil {
		t.Errorf("check(%s) = %v: the workspace itself stays exposable, with %s masked", f.ws, err, logs)
	}
	// A chain, relative at its last hop.
	chain := filepath.Join(f.root, "chain.jsonl")
	symlink(t, "home/audit-link.jsonl", chain)
	if g := newGuard([]string{f.home}, chain, ""); !slices.Contains(g.protected(), logs) {
		t.Errorf("through %s: protected() = %v, want it to hold %s", chain, g.protected(), logs)
	}
}

func TestEnvironment(t *testing.T) {
	got, err := environment([]string{"PATH", "LANG", "MISSING"}, []string{"PATH=/p", "LANG=C", "OTHER=x"}, "/home/u", "u", []string{"HTTPS_PROXY=http://p", "LANG=fr"})
	if err != nil {
		t.Fatal(err)
	}
	want := "PATH=/p LANG=fr HOME=/home/u TMPDIR=/tmp USER=u LOGNAME=u HTTPS_PROXY=http://p"
	if strings.Join(got, " ") != want {
		t.Fatalf("environment = %q, want %q", got, want)
	}
	got, _ = environment(nil, nil, "/h", "u", nil)
	if got[0] != "PATH="+fallbackPath {
		t.Fatalf("no host PATH: %q", got)
	}
	if _, err := environment(nil, nil, "/h", "u", []string{"NOEQUALS"}); err == nil {
		t.Fatal("an extra entry without = was accepted")
	}
}

// TestHostSockets: the host's control sockets are never exposed, under
// the fixed paths, in each runtime directory, and where $DOCKER_HOST
// points; a relative runtime directory or a TCP $DOCKER_HOST adds none.
func TestHostSockets(t *testing.T) {
	got := hostSockets([]string{"/run/user/1000", "", "relative", "/run/user/1000"}, "unix:///home/u/.docker/run/docker.sock")
	for _, want := range []string{"/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
		"/run/podman/podman.sock", "/run/dbus/system_bus_socket", "/run/systemd/private",
		"/run/user/1000/bus", "/run/user/1000/systemd/private", "/run/user/1000/docker.sock",
		"/run/user/1000/podman/podman.sock", "/run/user/1000/gnupg", "/run/user/1000/keyring", "/home/u/.docker/run/docker.sock"} {
		if !slices.Contains(got, want) {
			t.Errorf("hostSockets lacks %s", want)
		}
	}
	for _, p := range got {
		if !filepath.IsAbs(p) || strings.Contains(p, "relative") {
			t.Errorf("hostSockets holds %q", p)
		}
	}
	if n := len(hostSockets(nil, "tcp://127.0.0.1:2375")); n != len(hostSockets(nil, "")) {
		t.Errorf("a TCP DOCKER_HOST added %d paths", n-len(hostSockets(nil, "")))
	}
	g := guard{sockets: got}
	for _, p := range []string{"/run/user/1000/bus", "/run/user/1000/gnupg/S.gpg-agent", "/run/docker.sock"} {
		if err := g.check("allow_paths", p); err == nil || !strings.Contains(err.Error(), "run commands outside the box, or use your keys") {
			t.Errorf("check of %s: %v", p, err)
		}
	}
	if err := g.check("allow_paths", "/run/user/1000"); err != nil {
		t.Errorf("check of the runtime directory (which is masked, not refused): %v", err)
	}
}
