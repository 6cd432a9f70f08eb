package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/cordon-sandbox/cordon/internal/homedir"
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
%s
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
`, d.Terminate, commentLines("#   # ", defaultDenyRead, 78), strings.Join(d.Env, " "), d.RunAs,
		FormatSize(d.Limits.Memory), d.Limits.Pids, FormatSize(d.Limits.TmpSize), FormatSize(d.Limits.AuditBudget))
}

// commentLines lists words, separated by commas, in lines of at most width
// bytes (but for a longer word), each starting with prefix.
func commentLines(prefix string, words []string, width int) string {
	var b strings.Builder
	line := prefix
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if line != prefix && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}

// WriteInitConfig writes InitTemplate to path (mode 0600, its directory
// 0700), refusing to replace an existing file unless force is set.
func WriteInitConfig(path string, force bool) error {
	// A directory "already exists", and --force cannot replace it either.
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; a config is a file: name one, such as %s", path, filepath.Join(path, "config.yaml"))
	}
	err := writeConfig(path, []byte(InitTemplate()), 0o600, force)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; edit it, or pass --force to replace it with the template", path)
	}
	return err
}

// networkLine matches the line of a top-level network key, its line
// ending cut: the key as written (any case, quoted or not), its value and
// any trailing comment.
var networkLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^([ \t]*["']?network["']?[ \t]*:)[^#]*?([ \t]+#.*)?$`)
})

// SetNetworkMode sets the network key of the config at path, editing that
// one line so the rest of the file and its comments stay as they were. A
// missing file is created from InitTemplate first. An edit that would
// change anything but the mode is refused.
func SetNetworkMode(path string, mode NetMode) error {
	if mode.rank() < 0 {
		_, err := ParseNetMode(string(mode))
		return err
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	f, err := readConfig(path, false, "")
	if err != nil {
		return err
	}
	data, perm := []byte(InitTemplate()), fs.FileMode(0o600)
	if f != nil {
		data = f.data
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		}
	}
	home, err := homedir.Dir()
	if err != nil {
		return err
	}
	before, err := parseLayer(path, data, home)
	if err != nil {
		return fmt.Errorf("%w; fix the file before changing its network mode", err)
	}
	out, err := setNetworkLine(data, mode)
	if err != nil {
		return fmt.Errorf("%s: %w; edit the file by hand", path, err)
	}
	after, err := parseLayer(path, out, home)
	if err != nil || after.p.Network != mode || !sameButNetwork(before, after) {
		return fmt.Errorf("%s: could not set network: %s by editing the network key's line without changing anything else; edit the file by hand", path, mode)
	}
	return writeConfig(path, out, perm, true)
}

// setNetworkLine replaces the value of the top-level network key on its
// line, keeping the key as written and its comment, or appends the key
// when there is none. A UTF-8 byte order mark that starts the file (an
// editor's, which YAML skips) is kept, and not taken for part of the
// first line.
func setNetworkLine(data []byte, mode NetMode) ([]byte, error) {
	if rest, ok := bytes.CutPrefix(data, []byte(utf8BOM)); ok {
		out, err := setNetworkLine(rest, mode)
		if err != nil {
			return nil, err
		}
		return append([]byte(utf8BOM), out...), nil
	}
	n, err := networkKeyLine(data)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		out := append([]byte{}, data...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		return append(out, "network: "+string(mode)+"\n"...), nil
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	body := bytes.TrimRight(lines[n-1], "\r\n")
	m := networkLine().FindSubmatch(body)
	if m == nil {
		return nil, fmt.Errorf("line %d: the network key is not written as network: MODE on a line of its own", n)
	}
	line := string(m[1]) + " " + string(mode) + string(m[2]) + string(lines[n-1][len(body):])
	lines[n-1] = []byte(line)
	return bytes.Join(lines, nil), nil
}

// utf8BOM is the UTF-8 byte order mark.
const utf8BOM = "\ufeff"

// networkKeyLine returns the line (from 1) of the top-level network key
// of a YAML mapping, as parseLayer names keys (any case); 0 when there is
// none.
func networkKeyLine(data []byte) (int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return 0, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 0, nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if strings.ToLower(m.Content[i].Value) == "network" {
			return m.Content[i].Line, nil
		}
	}
	return 0, nil
}

// sameButNetwork reports whether two layers set the same keys to the
// same values, the network key aside.
func sameButNetwork(a, b *layer) bool {
	pa, pb := a.p, b.p
	pa.Network, pb.Network = "", ""
	notNetwork := func(ks []string) []string {
		return slices.DeleteFunc(ks, func(k string) bool { return k == "network" })
	}
	return reflect.DeepEqual(pa, pb) && slices.Equal(notNetwork(a.keys()), notNetwork(b.keys()))
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
