package sandbox

import (
	"bufio"
	"bytes"
	"os/user"
	"path/filepath"
	"strings"
)

// maxIncludeDepth is how deep git follows include.path (git's own bound).
const maxIncludeDepth = 10

// configIncludes lists the files the git config file at path includes
// (include.path and includeIf.*.path, whatever the condition: a condition
// may hold on the host), and those they include in turn, as absolute
// paths: relative ones from the including file's directory, "~/" and
// "~user/" from a home (homePath). A file that cannot be read, or is no regular file (readRegular),
// includes nothing.
func configIncludes(path, home string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		if depth > maxIncludeDepth || seen[p] {
			return
		}
		seen[p] = true
		data, err := readRegular(p)
		if err != nil {
			return
		}
		for _, inc := range includePaths(data) {
			h, fromHome := homePath(inc, home)
			switch {
			case fromHome:
				inc = h
			case !filepath.IsAbs(inc):
				inc = filepath.Join(filepath.Dir(p), inc)
			}
			inc = filepath.Clean(inc)
			out = append(out, inc)
			walk(inc, depth+1)
		}
	}
	walk(path, 0)
	return out
}

// homePath is the path p, a git config path ("~/x", "~alice/x") or a
// command's word, taken from a home directory as git (for include.path,
// core.hooksPath, init.templateDir) and the shell (for a command) take
// it: "~" is home's, "~user" that user's, from the password database.
// ok is false for a p that starts with no "~", or names no user.
func homePath(p, home string) (string, bool) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(p, "~"), "/")
	switch {
	case !strings.HasPrefix(p, "~"):
		return "", false
	case name == "":
		return filepath.Join(home, rest), true
	}
	u, err := user.Lookup(name)
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return "", false
	}
	return filepath.Join(u.HomeDir, rest), true
}

// includePaths reads the path values of a git config's [include] and
// [includeIf "..."] sections, as configEntries reads keys.
func includePaths(config []byte) []string {
	var paths []string
	for _, e := range configEntries(config) {
		if (e.is("include", "path") || e.is("includeif", "path")) && e.value != "" {
			paths = append(paths, e.value)
		}
	}
	return paths
}

// configLines scans the lines of the git config config, taking a line of
// any length: git does, and a scanner that stopped at a long one (a
// comment of a megabyte) left every key after it unseen. config is
// bounded (readRegular). A UTF-8 byte order mark that starts it (an
// editor's) is skipped, as git skips it: read as part of the first line,
// it hid the section header there, and every key under it.
func configLines(config []byte) *bufio.Scanner {
	config = bytes.TrimPrefix(config, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(config))
	sc.Buffer(nil, len(config)+1)
	return sc
}

// continued is the raw config value v, with the lines it continues on
// taken from sc: git reads a value whose line ends in a backslash (not
// escaped, quoted or not, and not in a comment) on into the next line, so
// "fsmonitor = sh tools/\" and "fsmon.sh" run tools/fsmon.sh.
func continued(v string, sc *bufio.Scanner) string {
	for continues(v) {
		v = v[:len(v)-1]
		if !sc.Scan() {
			break // git drops a backslash that ends the file
		}
		v += sc.Text()
	}
	return v
}

// continues says whether the raw config value v ends in a backslash that
// escapes the end of its line (see continued).
func continues(v string) bool {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 == len(v):
			return true
		case c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case (c == '#' || c == ';') && !quoted:
			return false
		}
	}
	return false
}

// configValue reads a git config value as git does: double quotes
// removed (with their backslash escapes: \n, \t and \b, a newline, a tab
// and a backspace), a comment (# or ; outside quotes) dropped, and each
// blank outside quotes (a space, a tab, a carriage return) read as a
// space, save those before anything else and after the last of it: git
// reads "hk<tab>dir" as "hk dir", and `"" .githooks` as ".githooks".
// What follows a NUL byte is dropped: git's readers of the value stop
// there.
func configValue(v string) string {
	var b strings.Builder
	blanks := 0 // unquoted blanks read and not yet written
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !quoted && (c == ' ' || c == '\t' || c == '\r') {
			if b.Len() > 0 {
				blanks++
			}
			continue
		}
		if !quoted && (c == '#' || c == ';') {
			break
		}
		for ; blanks > 0; blanks-- {
			b.WriteByte(' ')
		}
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(v[i])
			}
		case c == '"':
			quoted = !quoted
		default:
			b.WriteByte(c)
		}
	}
	v, _, _ = strings.Cut(b.String(), "\x00")
	return v
}
