package main

import (
	"encoding/json"
	"io"

	"github.com/cordon-sandbox/cordon/audit"
)

// writeJSON writes v to w as one JSON line with every character a
// terminal could act on escaped (audit.EscapeUnprintable). What cordon
// prints as JSON holds names the sandboxed command chose (the hosts it
// asked for, paths in its workspace), and encoding/json leaves C1
// controls and bidi overrides raw.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(audit.EscapeUnprintable(b), '\n'))
	return err
}
