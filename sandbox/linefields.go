package sandbox

import (
	"strconv"
	"strings"
)

// LineFields splits a line of cordon's own record files (the probe memo,
// the aftercare owed) into its kind, the first word, and its fields:
// quoted strings, or bare words (a number, true or false).
func LineFields(line string) (kind string, fields []string, ok bool) {
	kind, line, _ = strings.Cut(line, " ")
	for line != "" {
		var f string
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return "", nil, false
			}
			if f, err = strconv.Unquote(q); err != nil {
				return "", nil, false
			}
			line = line[len(q):]
		} else {
			end := strings.IndexByte(line, ' ')
			if end < 0 {
				end = len(line)
			}
			f, line = line[:end], line[end:]
		}
		fields = append(fields, f)
		if line == "" {
			break
		}
		if line[0] != ' ' || len(line) == 1 {
			return "", nil, false
		}
		line = line[1:]
	}
	return kind, fields, true
}
