package main

import "testing"

func TestParseExport(t *testing.T) {
	for _, tc := range []struct {
		line, name, value string
		ok                bool
	}{
		{"export HTTPS_PROXY='http://cordon:tok@127.0.0.1:3128'", "HTTPS_PROXY", "http://cordon:tok@127.0.0.1:3128", true},
		{"export NO_PROXY=''", "NO_PROXY", "", true},
		{`export A='it'\''s'`, "A", "it's", true},
		{"HTTPS_PROXY='x'", "", "", false},
		{"export HTTPS_PROXY=x", "", "", false},
		{"export ='x'", "", "", false},
		{"export A='", "", "", false},
	} {
		name, value, err := parseExport(tc.line)
		if (err == nil) != tc.ok || name != tc.name || value != tc.value {
			t.Errorf("parseExport(%q) = %q, %q, %v; want %q, %q, ok %v", tc.line, name, value, err, tc.name, tc.value, tc.ok)
		}
	}
}
