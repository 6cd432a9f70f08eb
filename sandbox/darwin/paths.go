package darwin

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// maxPath is macOS's PATH_MAX: the kernel refuses any longer path, so a
// longer one in a policy is a mistake, not a file.
const maxPath = 1024

// quote returns s as an SBPL string literal. Only '"' and '\' need a
// backslash; UTF-8 passes through as bytes. It refuses invalid UTF-8 (APFS
// names are UTF-8) and control characters, which no rule needs and which
// would let a path end a line early in a reader less careful than Seatbelt's.
func quote(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%q is not valid UTF-8; macOS file names are UTF-8", s)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			return "", fmt.Errorf("%q contains the control character %U; rename the file or leave it out of the policy", s, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// rootLinks are the top-level symlinks macOS resolves into /private for
// every process. Seatbelt matches resolved paths, so rules must name the
// /private form.
var rootLinks = []string{"/etc", "/tmp", "/var"}

// canonical cleans an absolute path and rewrites /tmp, /var and /etc into
// /private. It touches nothing on disk.
func canonical(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("empty path; write an absolute path")
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q is not absolute; write it from / or from ~/", p)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	c := path.Clean(p)
	for _, l := range rootLinks {
		if c == l || strings.HasPrefix(c, l+"/") {
			c = "/private" + c
			break
		}
	}
	if len(c) > maxPath {
		return "", fmt.Errorf("path %.40q... is %d bytes, longer than macOS's PATH_MAX of %d", c, len(c), maxPath)
	}
	return c, nil
}

// expandHome replaces a leading "~" or "~/" with home; the policy
// refuses other "~" forms, and canonical refuses whatever stays relative.
func expandHome(p, home string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return home + p[1:]
	}
	return p
}

// withinFold is within for a case-insensitive file system (APFS's default):
// ~/.SSH names the same directory as ~/.ssh.
func withinFold(p, dir string) bool {
	return sandbox.Within(strings.ToLower(p), strings.ToLower(dir))
}

// ancestors lists the directories above the canonical path p, from "/"
// down; "/" has none.
func ancestors(p string) []string {
	var out []string
	for d := p; d != "/"; {
		d = path.Dir(d)
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}
