//go:build linux

// Package procstat reads a process's /proc/PID/stat.
package procstat

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Fields are the fields of /proc/PID/stat after the process's name, from
// its state on (the third field is the first); nil when it cannot be
// read. The name, in parentheses, may hold spaces and parentheses: the
// fields start after the last ")".
func Fields(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}
