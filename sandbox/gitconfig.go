package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// configEntry is one key of a git config file: section and key in lower
// case, the subsection as written ("" for none), and the value (a key
// with no "=" is a boolean true, and has value "" and bare set).
type configEntry struct {
	section, sub, key, value string
	bare                     bool
}

// configEntries reads the keys of a git config file. Section and key
// names are case-insensitive; a subsection is quoted ([diff "tool"]) or,
// the old way, follows a dot ([diff.tool], lower-cased); a value may be
// quoted and followed by a comment (configValue).
func configEntries(config []byte) []configEntry {
	var out []configEntry
	section, sub := "", ""
	sc := configLines(config)
	for sc.Scan() {
		line := strings.Trim(sc.Text(), gitBlanks)
		ok := true
		// Headers may follow one another on a line, and a key the
		// last of them: git reads "[x] [core] hooksPath = h" as
		// core.hooksPath.
		for ok && strings.HasPrefix(line, "[") {
			section, sub, line, ok = sectionHeader(line)
		}
		if !ok {
			section, sub = "", ""
			continue
		}
		if line == "" || line[0] == '#' || line[0] == ';' || section == "" {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if ok {
			value = continued(value, sc)
		} else {
			key, _, _ = strings.Cut(key, "#")
			key, _, _ = strings.Cut(key, ";")
		}
		e := configEntry{section: section, sub: sub, key: strings.ToLower(strings.TrimSpace(key)), bare: !ok}
		if ok {
			e.value = configValue(value)
		}
		out = append(out, e)
	}
	return out
}

// sectionHeader reads the section header that starts line ("[core]",
// [diff "tool"], the old [diff.tool]) and returns its section (lower
// case) and subsection, and what follows it on the line; ok is false for
// a header that does not end.
func sectionHeader(line string) (section, sub, rest string, ok bool) {
	inner := line[1:]
	if q := strings.IndexByte(inner, '"'); q >= 0 && q < strings.IndexByte(inner+"]", ']') {
		var b strings.Builder
		j := q + 1
		for ; j < len(inner) && inner[j] != '"'; j++ {
			if inner[j] == '\\' && j+1 < len(inner) {
				j++
			}
			b.WriteByte(inner[j])
		}
		after := ""
		if j < len(inner) {
			after = inner[j+1:]
		}
		end := strings.IndexByte(after, ']')
		if end < 0 {
			return "", "", "", false
		}
		return strings.ToLower(strings.TrimSpace(inner[:q])), b.String(), strings.Trim(after[end+1:], gitBlanks), true
	}
	end := strings.IndexByte(inner, ']')
	if end < 0 {
		return "", "", "", false
	}
	section, sub, _ = strings.Cut(strings.ToLower(strings.TrimSpace(inner[:end])), ".")
	return section, sub, strings.Trim(inner[end+1:], gitBlanks), true
}

// gitBlanks are the bytes git's config reader takes for blanks: a form
// feed, a vertical tab or a Unicode space (which strings.TrimSpace would
// drop) is part of a value.
const gitBlanks = " \t\r\n"

// is says whether e is section.key (in any subsection).
func (e configEntry) is(section, key string) bool { return e.section == section && e.key == key }

// truth is e's value as a git boolean.
func (e configEntry) truth() bool {
	switch strings.ToLower(e.value) {
	case "true", "yes", "on", "1":
		return true
	}
	return e.bare
}

// commandKeys are the config keys whose value is a command git (or a
// program it starts) runs on the host, by section and key; each in any
// subsection (a filter, diff or merge driver's name, an alias, ssh in
// gpg.ssh.defaultKeyCommand, a trailer's token). A submodule's update is
// a command when it starts with "!".
var commandKeys = map[[2]string]bool{
	{"core", "fsmonitor"}: true, {"core", "sshcommand"}: true, {"core", "editor"}: true,
	{"core", "pager"}: true, {"core", "askpass"}: true, {"sequence", "editor"}: true,
	{"diff", "external"}: true, {"diff", "command"}: true, {"diff", "textconv"}: true,
	{"filter", "clean"}: true, {"filter", "smudge"}: true, {"filter", "process"}: true,
	{"merge", "driver"}: true, {"gpg", "program"}: true, {"credential", "helper"}: true,
	{"alias", ""}: true, {"pager", ""}: true, {"interactive", "difffilter"}: true,
	{"difftool", "cmd"}: true, {"mergetool", "cmd"}: true, {"difftool", "path"}: true,
	{"mergetool", "path"}: true, {"remote", "uploadpack"}: true, {"remote", "receivepack"}: true,
	{"browser", "cmd"}: true, {"browser", "path"}: true, {"man", "cmd"}: true, {"man", "path"}: true,
	{"core", "alternaterefscommand"}: true, {"core", "gitproxy"}: true, {"gpg", "defaultkeycommand"}: true,
	{"trailer", "cmd"}: true, {"trailer", "command"}: true, {"submodule", "update"}: true,
	{"sendemail", "sendmailcmd"}: true, {"sendemail", "smtpserver"}: true, {"sendemail", "tocmd"}: true,
	{"sendemail", "cccmd"}: true, {"guitool", "cmd"}: true, {"instaweb", "httpd"}: true,
}

// commandWord is one word of a command-valued config key that may name a
// file git, or the program it starts, runs on the host (commandWords).
type commandWord struct {
	path string
	// first says it is the program itself: a word of the value before
	// any other, looked up in PATH when it holds no slash.
	first bool
}

// commandSeparators end a word of a command value: blanks, quotes (the
// words of a quoted script, as in sh -c '...', are words too), and the
// shell's operators, substitutions and assignments.
const commandSeparators = " \t\n\r'\"`;|&()<>$={}"

// commandWords are the words of a command-valued config key (commandKeys)
// that may name a file of the workspace for git to run, or for the
// program it starts to read as a script: the program itself, when it
// holds a slash (a leading "!" of an alias or helper dropped; one named by
// bare name is found in PATH), and every later word, whatever the
// quoting (sh tools/clean.sh, python3 scripts/x.py, node ./tools/x.js,
// sh -c 'sh tools/x.sh && ./y'). A later word is a path when it holds a
// slash, or when a file of that name exists where git runs the command
// (configured looks). None for a key that is no command, or an alias
// that is a git command.
func commandWords(e configEntry) []commandWord {
	v, ok := commandOf(e)
	if !ok {
		return nil
	}
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(commandSeparators, r) })
	}
	words := split(v)
	seen := make(map[string]bool, len(words))
	for _, w := range words {
		seen[w] = true
	}
	// The shell joins what quotes and backslashes split: sh
	// tools/fs''mon.sh and sh tools/fs\mon.sh run tools/fsmon.sh. The
	// words of its own words are words too, and one that is a command of
	// its own (sh -c 'sh tools/"a".sh') is read the same way, a few
	// levels deep.
	level := []string{v}
	for range maxShellDepth {
		var next []string
		for _, s := range level {
			for _, sw := range shellWords(s) {
				for _, w := range split(sw) {
					if !seen[w] {
						seen[w] = true
						words = append(words, w)
					}
				}
				if strings.ContainsAny(sw, " \t\n'\"\\") {
					next = append(next, sw)
				}
			}
		}
		level = next
	}
	var out []commandWord
	for i, w := range words {
		if i == 0 && !strings.Contains(w, "/") {
			continue
		}
		out = append(out, commandWord{path: w, first: i == 0})
	}
	return out
}

// commandOf is the command e gives git to run on the host: the value of a
// command key (commandKeys; an alias's or helper's leading "!" dropped),
// or the command of an ext:: URL (extCommand). ok is false for an entry
// that names no command.
func commandOf(e configEntry) (cmd string, ok bool) {
	if cmd, ok := extCommand(e); ok {
		return cmd, true
	}
	key := [2]string{e.section, e.key}
	if e.section == "alias" || e.section == "pager" {
		key[1] = ""
	}
	if !commandKeys[key] {
		return "", false
	}
	v := strings.TrimSpace(e.value)
	if e.section == "alias" && !strings.HasPrefix(v, "!") {
		return "", false // a git command, not a program
	}
	return strings.TrimSpace(strings.TrimPrefix(v, "!")), true
}

// extCommand is the command of an ext:: URL: git runs "ext::sh
// tools/x.sh" on the host, at the next fetch or push where
// protocol.ext.allow (or protocol.allow) lets it, when it is a remote's
// url or pushurl, or the base a url.BASE.insteadOf or pushInsteadOf
// rewrites another URL to. git's escapes are undone ("% " is a blank
// inside a word, "%%" a percent sign); its placeholders (%s, %S, %G) are
// left as written.
func extCommand(e configEntry) (string, bool) {
	var u string
	switch {
	case e.section == "remote" && (e.key == "url" || e.key == "pushurl"):
		u = e.value
	case e.section == "url" && (e.key == "insteadof" || e.key == "pushinsteadof"):
		u = e.sub
	}
	cmd, ok := strings.CutPrefix(strings.TrimSpace(u), "ext::")
	if !ok {
		return "", false
	}
	return strings.NewReplacer("% ", " ", "%%", "%").Replace(cmd), true
}

// maxShellDepth bounds how many shells deep commandWords reads a command
// (sh -c "sh -c '...'").
const maxShellDepth = 4

// shellWords are the words of the command v as the shell reads them:
// split at unquoted blanks and operators, each quote's content kept
// without its quotes (a double quote's backslash escapes undone), and an
// unquoted backslash's escape undone. Expansions are left as written.
func shellWords(v string) []string {
	var words []string
	var b strings.Builder
	in := false // a word has begun
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\'':
			in = true
			end := strings.IndexByte(v[i+1:], '\'')
			if end < 0 {
				end = len(v) - i - 1
			}
			b.WriteString(v[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			in = true
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
					i++
				}
				b.WriteByte(v[i])
			}
		case c == '\\' && i+1 < len(v):
			in = true
			i++
			if v[i] != '\n' {
				b.WriteByte(v[i])
			}
		case strings.IndexByte(" \t\n;|&()<>", c) >= 0:
			if in {
				words = append(words, b.String())
				b.Reset()
				in = false
			}
		default:
			in = true
			b.WriteByte(c)
		}
	}
	if in {
		words = append(words, b.String())
	}
	return words
}

// commandPath is the program a command-valued config key names by a path
// (its first word, when it holds a slash), or "": the first of
// commandWords.
func commandPath(e configEntry) string {
	if w := commandWords(e); len(w) > 0 && w[0].first {
		return w[0].path
	}
	return ""
}

// hookNames are the hooks git runs (githooks(5)).
var hookNames = []string{"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
	"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase",
	"post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
	"post-receive", "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
	"post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist",
	"p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change"}

// systemGitConfig is the system-wide config git reads in every repository
// ($(prefix)/etc/gitconfig of a git built with prefix /usr, as Linux
// distributions build it), whatever $GIT_CONFIG_NOSYSTEM says to this
// process: the user's later git may not be told the same.
var systemGitConfig = "/etc/gitconfig"

// globalConfigs are the user's git config files, as git finds them, the
// system's, and the files $GIT_CONFIG_GLOBAL and $GIT_CONFIG_SYSTEM name
// in their place (git run with cordon's environment reads those; git run
// elsewhere, without them, the others).
func globalConfigs(home string) []string {
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	out := []string{filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig"), systemGitConfig}
	for _, v := range []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"} {
		if p := os.Getenv(v); filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

// globalConfigFiles lists the user's global git config files
// (globalConfigs) and what they include, in turn, to git's depth, as git
// reads them: each as the path git opens (relative includes are from its
// directory, "~/" and "~user/" from a home, homePath) and, where links on
// the way lead elsewhere, the real path they reach (a dotfiles repository's gitconfig, which
// ~/.gitconfig links to). link, when not nil, is called with each
// symbolic link on the way (Resolve): its error is returned.
func globalConfigFiles(home string, link func(path string) error) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(p string, depth int) error
	walk = func(p string, depth int) error {
		p = filepath.Clean(p)
		if depth > maxIncludeDepth || seen[p] || !filepath.IsAbs(p) {
			return nil
		}
		seen[p] = true
		real, _, err := Resolve(p, link)
		if err != nil {
			return err
		}
		out = append(out, p)
		if real != p {
			out = append(out, real)
		}
		data, err := readRegular(real)
		if errors.Is(err, errGitFileTooLarge) {
			return err // what it includes is unknown
		}
		if err != nil {
			return nil
		}
		for _, inc := range includePaths(data) {
			incs := []string{inc}
			h, fromHome := homePath(inc, home)
			switch {
			case fromHome:
				incs = []string{h}
			case !filepath.IsAbs(inc):
				// Git takes it from the directory of the path it
				// opened; from the real one's too, to be sure.
				incs = []string{filepath.Join(filepath.Dir(p), inc), filepath.Join(filepath.Dir(real), inc)}
			}
			for _, inc := range incs {
				if err := walk(inc, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, g := range globalConfigs(home) {
		if err := walk(g, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// guardGlobalConfig guards the user's global git config files, and what
// they include (globalConfigFiles), that lie under one of roots (the
// directories the box may write): git anywhere on the host reads them, so
// a box that could write one (a dotfiles repository as the workspace,
// with ~/.gitconfig a link into it, or an include.path naming a file of
// the workspace) would have its core.fsmonitor run at the user's next git
// status. Each is read-only, with the directories between the outermost
// root holding it and it pinned; a missing one is removed after the run
// if the run made it (Unmade). A symbolic link under a root on the way to
// one is refused: the box could replace it.
func guardGlobalConfig(roots []string) ([]GuardedPath, error) {
	files, err := globalConfigFiles(os.Getenv("HOME"), func(l string) error {
		for _, r := range roots {
			if Within(l, r) {
				return fmt.Errorf("%s, on the way to your global git config, is a symbolic link in %s, which the command may write: it could point git's config anywhere; replace it with what it points to", l, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := refuseHardLinked(files, roots); err != nil {
		return nil, fmt.Errorf("your global git config: %w", err)
	}
	var out []GuardedPath
	for _, f := range files {
		held := false
		for _, r := range roots {
			held = held || Within(f, r) && f != r
		}
		if !held {
			continue
		}
		if _, err := os.Lstat(f); errors.Is(err, fs.ErrNotExist) {
			out = append(out, GuardedPath{Path: f, Guard: Unmade})
			continue
		}
		more, err := guardBelowRoot(f, roots, false, false)
		if err != nil {
			return nil, fmt.Errorf("your global git config %s: %w", f, err)
		}
		out = append(out, seeConfigIn(more, f)...)
	}
	return out, nil
}

// configured guards what the config git reads for the git directory dir
// (its config and config.worktree, the user's global config, and what
// they include) names in the workspace for git to run on the host: the
// hooks directory core.hooksPath names (husky sets ".husky/_"), which
// git runs hooks from instead of dir's hooks, the template directory
// init.templateDir names (git init and clone copy its hooks), and the
// files a command key names (commandWords: core.fsmonitor, a filter, diff
// or merge driver, an alias, ...): the program, when named by a path, and
// each later word that holds a slash or names an existing file, such as
// the script of "sh tools/clean.sh" (a later word naming a directory is
// left alone). One that exists is read-only, with the
// directories between the workspace and it pinned; a missing one is
// removed after the run if the run made it (Unmade). A relative path is
// from the repository's worktree, where git runs hooks and commands; "~/"
// and "~user/" from a home (homePath). A hooks directory that is the workspace root itself has each
// hook git would run from it guarded instead. worktree is the
// repository's worktree, or "" to take it from dir (its core.worktree,
// or the directory above a .git). A linked worktree's git
// directory (outside the workspace: one inside it has no commondir, see
// dir) takes its config from the common directory its commondir names.
// It also guards, where the config turns extensions.worktreeConfig on, a
// missing config.worktree of dir and of its linked worktrees: git would
// read one the box made.
func (g *repoWalk) configured(dir, worktree string) ([]GuardedPath, error) {
	home := os.Getenv("HOME")
	own := filepath.Join(dir, "config")
	configs := []string{own, filepath.Join(dir, "config.worktree")}
	if common, ok := commonDir(dir); ok {
		own = filepath.Join(common, "config")
		configs = append(configs, own)
	}
	var entries, ownEntries []configEntry
	var files []string
	for _, f := range configs {
		files = append(append(files, f), configIncludes(f, home)...)
	}
	global, err := globalConfigFiles(home, nil)
	if errors.Is(err, errGitFileTooLarge) {
		return nil, fmt.Errorf("your global git config: %w", err)
	}
	files = append(files, global...)
	for _, f := range files {
		data, err := readRegular(f)
		if errors.Is(err, errGitFileTooLarge) {
			// Git reads it all, and what it names is unknown.
			return nil, fmt.Errorf("the git config of %s: %w", dir, err)
		}
		if err != nil {
			continue
		}
		more := configEntries(data)
		if f == own {
			ownEntries = more
		}
		entries = append(entries, more...)
	}
	if worktree == "" {
		worktree = dir
		if filepath.Base(dir) == ".git" {
			worktree = filepath.Dir(dir)
		}
	}
	// The git directory's own core.worktree is where git runs hooks and
	// commands, and takes relative paths from, whichever directory holds
	// its .git (a linked worktree's, in the common config, is not its).
	for _, e := range ownEntries {
		if e.is("core", "worktree") && e.value != "" && own == filepath.Join(dir, "config") {
			worktree = e.value
			if !filepath.IsAbs(worktree) {
				worktree = filepath.Join(dir, worktree)
			}
		}
	}
	// The shell that runs a command expands $HOME, and $PWD to where git
	// runs it, the worktree, as it does the substitutions that print that
	// (pwd, git rev-parse --show-toplevel); commandWords would take $ and
	// the substitution for separators and words, and the rest for a
	// relative word (or /tools/x.sh, no file of the workspace).
	var vars []string
	for _, v := range []string{"${HOME}", "$HOME"} {
		vars = append(vars, v, home)
	}
	for _, v := range []string{"${PWD}", "$PWD", "$(pwd)", "`pwd`", "$(git rev-parse --show-toplevel)", "`git rev-parse --show-toplevel`"} {
		vars = append(vars, v, worktree)
	}
	shellVars := strings.NewReplacer(vars...)
	var out []GuardedPath
	worktreeConfig := false
	for _, e := range entries {
		var words []commandWord
		hooks := false
		switch {
		case e.is("extensions", "worktreeconfig"):
			worktreeConfig = e.truth()
			continue
		case e.is("core", "hookspath"), e.is("init", "templatedir"):
			// A template directory's hooks are copied into each
			// repository the user makes or clones.
			words, hooks = []commandWord{{path: e.value, first: true}}, true
		default:
			e.value = shellVars.Replace(e.value)
			words = commandWords(e)
		}
		for _, w := range words {
			p := w.path
			h, fromHome := homePath(p, home)
			switch {
			case p == "":
				continue
			case fromHome:
				p = h
			case !filepath.IsAbs(p):
				p = filepath.Join(worktree, p)
			}
			p = filepath.Clean(p)
			// A pattern is whatever matches when git runs the command,
			// which the box could add to (sh tools/fs*.sh ran the box's
			// tools/0.sh): the directory it is matched in is kept from
			// the box instead.
			glob := false
			if i := strings.IndexAny(p, "*?["); i >= 0 && !hooks {
				glob, p = true, filepath.Dir(p[:i]+"_")
			}
			targets := []string{p}
			switch {
			case !Within(p, g.top):
				continue
			case p == g.top && glob:
				return nil, fmt.Errorf("the git config of %s names a pattern, %q, matched in the workspace root, for git to run (%s.%s): the command could add a match; name the file itself", dir, w.path, e.section, e.key)
			case p == g.top && !hooks:
				continue
			case p == g.top && e.is("init", "templatedir"):
				targets = []string{filepath.Join(p, "hooks")}
			case p == g.top:
				// The workspace root itself cannot be read-only: the hooks
				// git would run from it are.
				targets = nil
				for _, h := range hookNames {
					targets = append(targets, filepath.Join(p, h))
				}
			}
			for _, p := range targets {
				fi, err := os.Lstat(p)
				switch {
				case !w.first && err == nil && fi.IsDir() && !glob:
					// A later word naming a directory is where the
					// command works, not what it runs.
					continue
				case !w.first && err != nil && !strings.Contains(w.path, "/") && !glob:
					// A missing bare name is a word, not a file.
					continue
				case errors.Is(err, fs.ErrNotExist):
					if err := linkUnder(g.top, p); err != nil {
						return nil, fmt.Errorf("the git config of %s names %s for git to run (%s.%s): %w", dir, p, e.section, e.key, err)
					}
					out = append(out, GuardedPath{Path: p, Guard: Unmade})
					continue
				}
				rel, err := filepath.Rel(g.top, p)
				if err != nil {
					return nil, err
				}
				more, err := guardUnder(g.top, rel, false)
				if err != nil {
					return nil, fmt.Errorf("the git config of %s names %s for git to run (%s.%s): %w", dir, p, e.section, e.key, err)
				}
				for _, m := range more {
					if !slices.Contains(out, m) { // words of one script share directories
						out = append(out, m)
					}
				}
			}
		}
	}
	seeRun(out)
	if worktreeConfig && Within(dir, g.top) {
		dirs := []string{dir}
		worktrees, _ := os.ReadDir(filepath.Join(dir, "worktrees"))
		for _, w := range worktrees {
			if w.IsDir() {
				dirs = append(dirs, filepath.Join(dir, "worktrees", w.Name()))
			}
		}
		for _, d := range dirs {
			p := filepath.Join(d, "config.worktree")
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) && creatable(p) {
				out = append(out, GuardedPath{Path: p, Guard: AbsentFile, Config: seeConfig(p)})
			}
		}
	}
	return out, nil
}

// changeTimeIgnored says whether git, in the repository whose git
// directory is dir, may not compare a file's change time with its index
// entry's: where any config git may read for it (the user's global and
// the system's, the repository's, and what each includes, whatever an
// includeIf's condition) sets core.trustctime false or core.checkStat
// minimal. The box cannot write any of them (the repository's are
// guarded, the others lie outside the workspace), but the user may have.
func changeTimeIgnored(dir, home string) bool {
	files, _ := globalConfigFiles(home, nil)
	repo := []string{filepath.Join(dir, "config"), filepath.Join(dir, "config.worktree")}
	if common, ok := commonDir(dir); ok {
		repo = append(repo, filepath.Join(common, "config"))
	}
	for _, c := range repo {
		files = append(append(files, c), configIncludes(c, home)...)
	}
	for _, f := range files {
		data, err := readRegular(f)
		if err != nil {
			continue
		}
		for _, e := range configEntries(data) {
			if e.is("core", "trustctime") && !e.truth() || e.is("core", "checkstat") && strings.EqualFold(e.value, "minimal") {
				return true
			}
		}
	}
	return false
}
