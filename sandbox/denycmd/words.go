package denycmd

import (
	"path/filepath"
	"strings"
)

// Bounds on one reading: how deep wrappers nest, and how many command
// words one argv may yield, so hostile input cannot make it slow.
const (
	maxDepth = 8
	maxWords = 4096
)

// Word is one command a command line would run.
type Word struct {
	// Name is the command as written (a name or a path).
	Name string
	// Via says how it was reached, e.g. "sh -c > env"; empty for argv[0].
	Via string
}

// reader collects command words within the bounds.
type reader struct {
	words []Word
}

// Words returns argv[0] and every command argv would run through the
// wrappers cordon understands: env, exec, nice, nohup, timeout, stdbuf,
// setsid, ionice, xargs, busybox, command, time; sh/bash/dash/zsh/ksh -c
// strings (pipelines, lists, $(...) and backticks); and the string
// literals of python -c, node -e/-p, perl -e/-E and ruby -e one-liners,
// each read as a shell command line. It is a best effort: it reads what
// is written, not what a program computes at run time.
func Words(argv []string) []Word {
	var r reader
	r.argv(argv, "", 0)
	return r.words
}

func (r *reader) add(name, via string) bool {
	if len(r.words) >= maxWords {
		return false
	}
	r.words = append(r.words, Word{Name: name, Via: via})
	return true
}

// via extends a path of wrappers.
func via(parent, step string) string {
	if parent == "" {
		return step
	}
	return parent + " > " + step
}

// argv reads one command and its arguments.
func (r *reader) argv(argv []string, from string, depth int) {
	if len(argv) == 0 || depth > maxDepth || !r.add(argv[0], from) {
		return
	}
	name := filepath.Base(argv[0])
	args := argv[1:]
	next := func(rest []string) { r.argv(rest, via(from, name), depth+1) }
	switch {
	case name == "env":
		r.env(args, via(from, name), depth)
	case name == "exec" || name == "nohup" || name == "time" || name == "builtin":
		next(skipOptions(args, nil))
	case name == "command":
		if len(args) > 0 && (args[0] == "-v" || args[0] == "-V") {
			return // a lookup, not a run
		}
		next(skipOptions(args, nil))
	case name == "nice":
		next(skipOptions(args, map[string]bool{"-n": true, "--adjustment": true}))
	case name == "timeout":
		rest := skipOptions(args, map[string]bool{"-s": true, "--signal": true, "-k": true, "--kill-after": true})
		if len(rest) > 0 {
			next(rest[1:]) // the duration
		}
	case name == "stdbuf":
		next(skipOptions(args, map[string]bool{"-i": true, "-o": true, "-e": true, "--input": true, "--output": true, "--error": true}))
	case name == "setsid":
		next(skipOptions(args, nil))
	case name == "ionice":
		next(skipOptions(args, map[string]bool{"-c": true, "-n": true, "-p": true, "-P": true, "-u": true, "--class": true, "--classdata": true}))
	case name == "xargs":
		next(skipOptions(args, map[string]bool{"-I": true, "-n": true, "-P": true, "-L": true, "-d": true, "-a": true, "-E": true, "-s": true,
			"--max-args": true, "--max-procs": true, "--delimiter": true, "--arg-file": true, "--max-lines": true, "--max-chars": true}))
	case name == "busybox":
		next(args)
	case isShell(name):
		r.shellArgs(args, via(from, name), depth)
	case isPython(name):
		r.oneLiner(args, []string{"-c"}, via(from, name), depth)
	case name == "node" || name == "nodejs":
		r.oneLiner(args, []string{"-e", "--eval", "-p", "--print"}, via(from, name), depth)
	case name == "perl":
		r.oneLiner(args, []string{"-e", "-E"}, via(from, name), depth)
	case name == "ruby":
		r.oneLiner(args, []string{"-e"}, via(from, name), depth)
	}
}

// skipOptions drops leading options (and the values of those in
// withValue) and a "--", returning the command that follows.
func skipOptions(args []string, withValue map[string]bool) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case !strings.HasPrefix(a, "-") || a == "-":
			return args[i:]
		case strings.Contains(a, "="):
			continue
		case withValue[a]:
			i++
		}
	}
	return nil
}

// env reads env's options and assignments, then its command. -S splits a
// string into the command line.
func (r *reader) env(args []string, from string, depth int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			r.argv(skipAssignments(args[i+1:]), from, depth+1)
			return
		case a == "-S" || a == "--split-string":
			if i+1 < len(args) {
				r.argv(append(strings.Fields(args[i+1]), skipAssignments(args[i+2:])...), from, depth+1)
			}
			return
		case strings.HasPrefix(a, "-S"):
			r.argv(append(strings.Fields(a[2:]), args[i+1:]...), from, depth+1)
			return
		case strings.HasPrefix(a, "--split-string="):
			r.argv(append(strings.Fields(strings.TrimPrefix(a, "--split-string=")), args[i+1:]...), from, depth+1)
			return
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i++
		case strings.HasPrefix(a, "-") && a != "-":
		case isAssignment(a):
		default:
			r.argv(args[i:], from, depth+1)
			return
		}
	}
}

// skipAssignments drops leading NAME=VALUE words.
func skipAssignments(args []string) []string {
	for i, a := range args {
		if !isAssignment(a) {
			return args[i:]
		}
	}
	return nil
}

// isAssignment says whether s is a shell variable assignment (NAME=...).
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range name {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish":
		return true
	}
	return false
}

// isPython matches python, python3, python3.12 and the like.
func isPython(name string) bool {
	v, ok := strings.CutPrefix(name, "python")
	return ok && strings.Trim(v, "0123456789.") == ""
}

// shellArgs finds a shell's -c string: the first operand after an option
// cluster holding 'c' (sh -c, bash -lc, sh -e -c).
func (r *reader) shellArgs(args []string, from string, depth int) {
	hasC := false
	for _, a := range args {
		switch {
		case a == "--":
			continue
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			if !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
				hasC = true
			}
		case hasC:
			r.shell(a, via(from, "-c"), depth+1)
			return
		default:
			return // a script file: its contents are the sandbox's to choose
		}
	}
}

// oneLiner reads an interpreter's inline code: each string literal is read
// as a shell command line (os.system, subprocess, child_process, system).
func (r *reader) oneLiner(args, flags []string, from string, depth int) {
	for i, a := range args {
		for _, f := range flags {
			code := ""
			switch {
			case a == f && i+1 < len(args):
				code = args[i+1]
			case strings.HasPrefix(a, f) && !strings.HasPrefix(f, "--") && len(a) > len(f):
				code = a[len(f):]
			case strings.HasPrefix(f, "--") && strings.HasPrefix(a, f+"="):
				code = a[len(f)+1:]
			default:
				continue
			}
			for _, lit := range literals(code) {
				r.shell(lit, via(from, f), depth+1)
			}
			return
		}
	}
}

// literals returns the contents of the quoted strings in code ('...',
// "..." and `...`, with backslash escapes), in order.
func literals(code string) []string {
	var out []string
	for i := 0; i < len(code); i++ {
		q := code[i]
		if q != '\'' && q != '"' && q != '`' {
			continue
		}
		var b strings.Builder
		j := i + 1
		for ; j < len(code) && code[j] != q; j++ {
			if code[j] == '\\' && j+1 < len(code) {
				j++
			}
			b.WriteByte(code[j])
		}
		if s := b.String(); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
		i = j
	}
	return out
}
