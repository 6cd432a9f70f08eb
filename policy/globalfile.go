package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// InitTemplate returns the commented global config cordon init writes:
// restricted network, an empty allowlist, every other key shown commented
// out with its default.
func InitTemplate() string {
	d := Defaults()
	return fmt.Sprintf(`# cordon global config: the operator's posture for every run.
# A project's .cordon.yaml can only narrow it; one-shot flags widen one run.
# Unknown keys are errors, so a misspelt deny is never silently dropped.

# Network for cordon run: off, restricted (only the allowlist below, through
# cordon's proxy) or open. Change it with: cordon network off|restricted|open
network: restricted

# Hosts reachable in restricted mode: example.com, *.example.com (subdomains
# only), 192.0.2.0/24 or [2001:db8::1]; ports 80 and 443 unless ":PORT" or
# ":*" follows.
allow: []
# allow:
#   - api.github.com
#   - "*.githubusercontent.com"
#   - proxy.golang.org
#   - registry.npmjs.org:443

# Hosts refused even when an allow entry matches them (deny wins).
# deny:
#   - gist.github.com

# Also refuse private (RFC 1918, ULA, CGNAT) addresses.
# deny_private: false

# Terminate TLS on every allowed connection (all) or tunnel it unread (none),
# and hosts tunnelled unread anyway (pinned clients, mutual TLS).
# terminate: %s
# exclude:
#   - "*.pinned.example"
# PEM files of extra CAs trusted for upstreams and inside the sandbox.
# extra_ca:
#   - /etc/ssl/corporate-ca.pem

# Filesystem. The workspace is read-write; these add to it.
# expose:            # read-only toolchains outside /usr
#   - ~/.rustup
# allow_paths:       # PATH (read-only) or PATH:rw
#   - ~/.cache/go-build:rw
# deny_read:         # read as empty; added to the defaults:
#   # %s
#   - ~/.config/private
# read_only:         # in the workspace, from its root: readable, not
#   - .vscode        # writable, renamable or removable (if they exist
#   - .github/workflows  # when the run starts)
# deny_commands:     # refused by name or by same file
#   - sudo

# Host variables passed in by name, added to the defaults:
# %s
# env:
#   - GOFLAGS

# The user a root invocation runs the command as.
# run_as: %s

# Limits; 0 means none.
# limits:
#   timeout: 0s
#   memory: %s
#   pids: %d
#   tmp_size: %s
#   audit_budget: %s  # audit lines one session may write; past it, deny

# Masked credentials: the sandbox sees only a placeholder in env; the proxy
# puts the real secret in the header on requests to the listed hosts.
# credentials:
#   - name: provider
#     source: {env: PROVIDER_REAL_KEY}
#     hosts: [api.provider.example]
#     header: "Authorization: Bearer {}"
#     env: PROVIDER_API_KEY
`, d.Terminate, strings.Join(defaultDenyRead, " "), strings.Join(d.Env, " "), d.RunAs,
		FormatSize(d.Limits.Memory), d.Limits.Pids, FormatSize(d.Limits.TmpSize), FormatSize(d.Limits.AuditBudget))
}

// WriteInitConfig writes InitTemplate to path (mode 0600, its directory
// 0700), refusing to replace an existing file unless force is set.
func WriteInitConfig(path string, force bool) error {
	err := writeConfig(path, []byte(InitTemplate()), 0o600, force)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; edit it, or pass --force to replace it with the template", path)
	}
	return err
}

// networkLine matches a top-level "network:" line: the key, its value and
// any trailing comment.
var networkLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^network[ \t]*:[^#\n]*?([ \t]+#[^\n]*)?$`)
})

// SetNetworkMode sets the network key of the config at path, editing that
// one line so the rest of the file and its comments stay as they were. A
// missing file is created from InitTemplate first.
func SetNetworkMode(path string, mode NetMode) error {
	if mode.rank() < 0 {
		_, err := ParseNetMode(string(mode))
		return err
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	data, err := os.ReadFile(path)
	perm := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = []byte(InitTemplate())
	case err != nil:
		return fmt.Errorf("read config %s: %w", path, err)
	default:
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	home, err := homeDir()
	if err != nil {
		return err
	}
	if _, err := parseLayer(path, data, home); err != nil {
		return fmt.Errorf("%w; fix the file before changing its network mode", err)
	}
	out := setNetworkLine(data, mode)
	l, err := parseLayer(path, out, home)
	if err != nil || l.p.Network != mode {
		return fmt.Errorf("%s: could not set network: %s by editing one line (the key spans several lines?); edit the file by hand", path, mode)
	}
	return writeConfig(path, out, perm, true)
}

// setNetworkLine replaces the value of the first top-level network key,
// keeping its comment, or appends the key when there is none.
func setNetworkLine(data []byte, mode NetMode) []byte {
	if loc := networkLine().FindSubmatchIndex(data); loc != nil {
		comment := ""
		if loc[2] >= 0 {
			comment = string(data[loc[2]:loc[3]])
		}
		line := "network: " + string(mode) + comment
		return append(append(append([]byte{}, data[:loc[0]]...), line...), data[loc[1]:]...)
	}
	out := append([]byte{}, data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, "network: "+string(mode)+"\n"...)
}

// writeConfig writes data to path atomically, creating its directory with
// mode 0700 when missing. Without replace an existing path is an error
// wrapping fs.ErrExist.
func writeConfig(path string, data []byte, perm fs.FileMode, replace bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case replace:
		err = os.Rename(tmp.Name(), path)
	default:
		// A hard link never replaces an existing file, unlike a rename.
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}
