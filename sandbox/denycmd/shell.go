package denycmd

import "strings"

// reservedWords are shell keywords that may stand where a command name
// would; the command follows them.
var reservedWords = map[string]bool{
	"!": true, "{": true, "}": true, "if": true, "then": true, "else": true, "elif": true, "fi": true,
	"do": true, "done": true, "while": true, "until": true, "time": true, "esac": true, "coproc": true,
}

// skipCommand are keywords whose words up to the next separator are not
// commands (for x in a b; case $x in; function f).
var skipCommand = map[string]bool{"for": true, "select": true, "case": true, "function": true, "in": true}

// token is a word (quotes removed) or a separator between commands.
type token struct {
	word string
	sep  bool
	// redir marks a redirection operator: the next word is its target.
	redir bool
}

// shell reads a shell command line: the first word of each simple command
// (after assignments, redirections and reserved words) is read with its
// arguments as a command, and every $(...), `...`, <(...) and >(...) as a
// command line of its own.
func (r *reader) shell(s, from string, depth int) {
	if depth > maxDepth {
		return
	}
	toks, subs := tokenize(s)
	var cmd []string
	flush := func() {
		words := cmd
		cmd = nil
		for len(words) > 0 && (isAssignment(words[0]) || reservedWords[words[0]]) {
			words = words[1:]
		}
		if len(words) == 0 || skipCommand[words[0]] {
			return
		}
		r.argv(words, from, depth)
	}
	skipNext := false
	for _, t := range toks {
		switch {
		case t.sep:
			flush()
		case t.redir:
			skipNext = true
		case skipNext:
			skipNext = false
		default:
			cmd = append(cmd, t.word)
		}
	}
	flush()
	for _, sub := range subs {
		r.shell(sub, via(from, "$(...)"), depth+1)
	}
}

// tokenize splits a command line into words and separators, removing
// quotes, and returns the command substitutions it holds.
func tokenize(s string) (toks []token, subs []string) {
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			toks = append(toks, token{word: w.String()})
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			end()
			toks = append(toks, token{sep: true})
		case (c == '<' || c == '>') && i+1 < len(s) && s[i+1] == '(':
			end()
			body, n := balanced(s, i+2)
			subs = append(subs, body)
			i = n
		case c == '<' || c == '>':
			if isDigits(w.String()) {
				w.Reset()
				inWord = false
			}
			end()
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '<' || s[i+1] == '&' || s[i+1] == '|') {
				i++
			}
			toks = append(toks, token{redir: true})
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			i--
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
					inWord = true
				}
			}
		case c == '\'':
			inWord = true
			for i++; i < len(s) && s[i] != '\''; i++ {
				w.WriteByte(s[i])
			}
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s):
					i++
					w.WriteByte(s[i])
				case s[i] == '$' && i+1 < len(s) && s[i+1] == '(':
					body, n := balanced(s, i+2)
					subs = append(subs, body)
					i = n
				case s[i] == '`':
					body, n := backquoted(s, i+1)
					subs = append(subs, body)
					i = n
				default:
					w.WriteByte(s[i])
				}
			}
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			body, n := balanced(s, i+2)
			subs = append(subs, body)
			i = n
			inWord = true
		case c == '`':
			body, n := backquoted(s, i+1)
			subs = append(subs, body)
			i = n
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	end()
	return toks, subs
}

// balanced returns the text from start up to the parenthesis that closes
// an already opened one, and the index of that parenthesis (or the end).
// Quoted parentheses do not count.
func balanced(s string, start int) (string, int) {
	level := 1
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '\'':
			for i++; i < len(s) && s[i] != '\''; i++ {
			}
		case '(':
			level++
		case ')':
			level--
			if level == 0 {
				return s[start:i], i
			}
		}
	}
	return s[start:], len(s)
}

// backquoted returns the text up to the closing backquote and its index.
func backquoted(s string, start int) (string, int) {
	var b strings.Builder
	for i := start; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == '`':
			return b.String(), i
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), len(s)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
