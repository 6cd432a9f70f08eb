package homedir

import (
	"os/user"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ home, want string }{
		{"/home/alice", "/home/alice"},
		{"/home/alice/", "/home/alice"},
		{"rel", filepath.Clean(u.HomeDir)},
		{"./", filepath.Clean(u.HomeDir)},
		{"", filepath.Clean(u.HomeDir)},
	} {
		t.Setenv("HOME", tt.home)
		got, err := Dir()
		if err != nil || got != tt.want {
			t.Errorf("HOME=%q: Dir() = %q, %v; want %q", tt.home, got, err, tt.want)
		}
	}
}
