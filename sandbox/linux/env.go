//go:build linux

package linux

import (
	"fmt"
	"strings"
)

// fallbackPath is the sandbox's PATH when the host has none.
const fallbackPath = "/usr/local/bin:/usr/bin:/bin"

// environment composes the command's variables: the named host variables
// that are set, then HOME, TMPDIR, USER and LOGNAME, then extra
// (NAME=VALUE entries, e.g. the proxy settings), later entries winning.
func environment(names, hostEnv []string, home, user string, extra []string) ([]string, error) {
	host := map[string]string{}
	for _, kv := range hostEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			host[k] = v
		}
	}
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, n := range names {
		if v, ok := host[n]; ok {
			set(n, v)
		}
	}
	if _, ok := vals["PATH"]; !ok {
		set("PATH", fallbackPath)
	}
	set("HOME", home)
	set("TMPDIR", "/tmp")
	set("USER", user)
	set("LOGNAME", user)
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("environment entry %q is not NAME=VALUE", kv)
		}
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}
