package darwin

import (
	"fmt"
	"strings"
)

// node is one datum of an SBPL profile as the test's reader sees it.
type node struct {
	list   []node
	isList bool
	atom   string // a bare symbol or number
	str    string // a string literal's value
	isStr  bool
	regex  bool // a #"..." regular expression literal
}

// readSBPL reads an SBPL profile strictly: lists must balance, string
// literals must end, the only escapes are \" and \\, no literal holds a
// control character, and no bare atom holds '/', '\' or '#', so a path can
// only appear inside a string literal. Comments run from ';' to the end of
// the line.
func readSBPL(text string) ([]node, error) {
	stack := [][]node{nil}
	line := 1
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t':
			i++
		case c == ';':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '(':
			stack = append(stack, nil)
			i++
		case c == ')':
			if len(stack) == 1 {
				return nil, fmt.Errorf("line %d: ')' closes nothing", line)
			}
			done := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			stack[len(stack)-1] = append(stack[len(stack)-1], node{list: done, isList: true})
			i++
		case c == '"' || (c == '#' && i+1 < len(text) && text[i+1] == '"'):
			regex := c == '#'
			if regex {
				i++
			}
			s, n, err := readString(text[i:], regex)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			stack[len(stack)-1] = append(stack[len(stack)-1], node{str: s, isStr: true, regex: regex})
			i += n
		default:
			j := i
			for j < len(text) && !strings.ContainsRune(" \t\n();\"", rune(text[j])) {
				j++
			}
			a := text[i:j]
			if strings.ContainsAny(a, `/\#`) || strings.ContainsFunc(a, isControl) {
				return nil, fmt.Errorf("line %d: bare atom %q looks like a path or a broken literal", line, a)
			}
			stack[len(stack)-1] = append(stack[len(stack)-1], node{atom: a})
			i = j
		}
	}
	if len(stack) != 1 {
		return nil, fmt.Errorf("%d list(s) left open at the end", len(stack)-1)
	}
	return stack[0], nil
}

// readString reads a literal starting at its opening quote and returns its
// value and length.
func readString(text string, regex bool) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c < 0x20 || c == 0x7f:
			return "", 0, fmt.Errorf("control byte %#x inside a literal", c)
		case c == '\\':
			if regex {
				return "", 0, fmt.Errorf("backslash inside a regex literal")
			}
			if i+1 >= len(text) || (text[i+1] != '"' && text[i+1] != '\\') {
				return "", 0, fmt.Errorf("escape other than \\\" or \\\\ inside a string")
			}
			i++
			b.WriteByte(text[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("string literal never ends")
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// String writes n back as SBPL, for failure messages.
func (n node) String() string {
	switch {
	case n.isList:
		parts := make([]string, len(n.list))
		for i, c := range n.list {
			parts[i] = c.String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	case n.isStr:
		q, _ := quote(n.str)
		if n.regex {
			return "#" + q
		}
		return q
	}
	return n.atom
}

// checkProfile reads a rendered profile and checks its shape: (version 1)
// first, then only allow and deny rules, and every path filter holding one
// absolute path in a string literal.
func checkProfile(text string) ([]node, error) {
	forms, err := readSBPL(text)
	if err != nil {
		return nil, err
	}
	if len(forms) == 0 || forms[0].String() != "(version 1)" {
		return nil, fmt.Errorf("profile does not start with (version 1)")
	}
	for _, f := range forms[1:] {
		if !f.isList || len(f.list) < 2 || (f.list[0].atom != "allow" && f.list[0].atom != "deny") {
			return nil, fmt.Errorf("top-level form %s is not an allow or deny rule", f)
		}
		if err := checkFilters(f); err != nil {
			return nil, err
		}
	}
	return forms, nil
}

func checkFilters(n node) error {
	if !n.isList {
		return nil
	}
	if len(n.list) > 0 {
		switch n.list[0].atom {
		case "subpath", "literal":
			if len(n.list) != 2 || !n.list[1].isStr || n.list[1].regex || !strings.HasPrefix(n.list[1].str, "/") {
				return fmt.Errorf("path filter %s does not hold exactly one absolute path literal", n)
			}
		}
	}
	for _, c := range n.list {
		if err := checkFilters(c); err != nil {
			return err
		}
	}
	return nil
}

// pathLiterals returns the paths of every subpath and literal filter of the
// rules whose head is action (allow or deny) and whose operations include op.
func pathLiterals(forms []node, action, op string) []string {
	var out []string
	for _, f := range forms[1:] {
		if f.list[0].atom != action {
			continue
		}
		hasOp := false
		for _, c := range f.list[1:] {
			if !c.isList && c.atom == op {
				hasOp = true
			}
			if hasOp && c.isList && (c.list[0].atom == "subpath" || c.list[0].atom == "literal") {
				out = append(out, c.list[1].str)
			}
		}
	}
	return out
}
