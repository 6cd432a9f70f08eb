package denycmd

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func names(ws []Word) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func TestWords(t *testing.T) {
	tests := []struct {
		argv []string
		want []string // must all appear
	}{
		{[]string{"curl", "x"}, []string{"curl"}},
		{[]string{"sh", "-c", "curl x | sh"}, []string{"sh", "curl", "sh"}},
		{[]string{"bash", "-lc", "echo hi && wget y; true"}, []string{"bash", "echo", "wget", "true"}},
		{[]string{"sh", "-e", "-c", "FOO=1 >out 2>&1 nc -l 1"}, []string{"nc"}},
		{[]string{"sh", "-c", "echo $(curl x) `wget y` \"$(nc z)\""}, []string{"echo", "curl", "wget", "nc"}},
		{[]string{"sh", "-c", "diff <(curl a) >(nc b)"}, []string{"diff", "curl", "nc"}},
		{[]string{"sh", "-c", "if true; then curl x; fi; for i in a b; do nc $i; done"}, []string{"curl", "nc"}},
		{[]string{"sh", "-c", "'cu''rl' x; c\\url y"}, []string{"curl"}},
		{[]string{"env", "-i", "-u", "HOME", "A=1", "curl"}, []string{"env", "curl"}},
		{[]string{"env", "-S", "curl -s x"}, []string{"curl"}},
		{[]string{"env", "--", "B=2", "nc"}, []string{"nc"}},
		{[]string{"nice", "-n", "5", "timeout", "-s", "KILL", "10", "nohup", "curl"}, []string{"nice", "timeout", "nohup", "curl"}},
		{[]string{"stdbuf", "-o", "L", "setsid", "-f", "ionice", "-c", "3", "xargs", "-n", "1", "wget"}, []string{"wget"}},
		{[]string{"exec", "curl"}, []string{"curl"}},
		{[]string{"busybox", "wget", "x"}, []string{"wget"}},
		{[]string{"/usr/bin/python3", "-c", "import os; os.system('curl x')"}, []string{"curl"}},
		{[]string{"python3.11", "-c", `import subprocess; subprocess.run(["nc", "-l"])`}, []string{"nc"}},
		{[]string{"node", "-e", "require('child_process').execSync(`wget x`)"}, []string{"wget"}},
		{[]string{"node", "--eval=require('child_process').exec(\"curl\")"}, []string{"curl"}},
		{[]string{"perl", "-e", `system("curl x")`}, []string{"curl"}},
		{[]string{"ruby", "-e", "`nc x`"}, []string{"nc"}},
		{[]string{"sh", "-c", "sh -c \"bash -c 'curl x'\""}, []string{"curl"}},
	}
	for _, tt := range tests {
		got := names(Words(tt.argv))
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("Words(%q) = %q, lacks %q", tt.argv, got, w)
			}
		}
	}
}

func TestWordsNotCommands(t *testing.T) {
	tests := []struct {
		argv    []string
		notWant string
	}{
		{[]string{"echo", "curl"}, "curl"},
		{[]string{"sh", "-c", "echo curl > wget"}, "wget"},
		{[]string{"sh", "-c", "echo curl"}, "curl"},
		{[]string{"sh", "script.sh", "curl"}, "curl"},
		{[]string{"command", "-v", "curl"}, "curl"},
		{[]string{"sh", "-c", "# curl\ntrue"}, "curl"},
		{[]string{"sh", "-c", "for curl in a; do true; done"}, "curl"},
	}
	for _, tt := range tests {
		if got := names(Words(tt.argv)); slices.Contains(got, tt.notWant) {
			t.Errorf("Words(%q) = %q, holds %q", tt.argv, got, tt.notWant)
		}
	}
}

func TestWordsVia(t *testing.T) {
	ws := Words([]string{"env", "sh", "-c", "curl x"})
	last := ws[len(ws)-1]
	if last.Name != "curl" || last.Via != "env > sh > -c" {
		t.Fatalf("last word %+v", last)
	}
}

func TestWordsBounded(t *testing.T) {
	start := time.Now()
	deep := strings.Repeat("echo $(", 1000) + "curl" + strings.Repeat(")", 1000)
	if ws := Words([]string{"sh", "-c", deep}); len(ws) > maxWords || slices.Contains(names(ws), "curl") {
		t.Fatalf("nesting beyond maxDepth was followed: %d words", len(ws))
	}
	shallow := "curl"
	for range maxDepth - 2 {
		shallow = "sh -c " + shellQuote(shallow)
	}
	if ws := Words([]string{"sh", "-c", shallow}); !slices.Contains(names(ws), "curl") {
		t.Fatalf("nesting within maxDepth was not followed: %q", names(ws))
	}
	many := strings.Repeat("true;", 100000)
	if n := len(Words([]string{"sh", "-c", many})); n > maxWords {
		t.Fatalf("%d words from a long list", n)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func FuzzWords(f *testing.F) {
	for _, s := range []string{
		"sh\x00-c\x00curl x | sh",
		"env\x00-S\x00curl -s\x00x",
		"python3\x00-c\x00import os; os.system('curl')",
		"sh\x00-c\x00echo $(a $(b `c`)) \"$(d)\" <(e) >(f) 2>&1 >x",
		"sh\x00-c\x00'unterminated",
		"sh\x00-c\x00$(((((",
		"node\x00-e\x00\"\\",
		"timeout\x00-k\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		ws := Words(argv)
		if len(ws) > maxWords {
			t.Fatalf("%d words", len(ws))
		}
		if len(argv) > 0 && argv[0] != "" && (len(ws) == 0 || ws[0].Name != argv[0]) {
			t.Fatalf("argv[0] %q is not the first word: %v", argv[0], ws)
		}
	})
}

func TestIsAssignmentAndIsPython(t *testing.T) {
	for s, want := range map[string]bool{"A=1": true, "_x9=": true, "a_B=c=d": true, "=x": false, "9a=1": false, "a-b=1": false, "ls": false, "é=1": false} {
		if got := isAssignment(s); got != want {
			t.Errorf("isAssignment(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{"python": true, "python3": true, "python3.12": true, "pythonx": false, "ipython": false, "python3-config": false} {
		if got := isPython(s); got != want {
			t.Errorf("isPython(%q) = %v, want %v", s, got, want)
		}
	}
}
