package sandbox

import (
	"os"
	"strconv"
	"strings"
)

// processStart is when process pid started, in clock ticks since boot
// (/proc/PID/stat's starttime), as text; "" when it cannot be read. A pid
// and its start name one process: a pid alone may be another's later.
func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The name, in parentheses, may hold spaces and parentheses: the
	// fields start after the last ")". starttime is the 22nd field, the
	// 20th after the name.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}
