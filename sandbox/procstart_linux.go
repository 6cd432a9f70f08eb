package sandbox

import "github.com/cordon-sandbox/cordon/internal/procstat"

// processStart is when process pid started, in clock ticks since boot
// (/proc/PID/stat's starttime, its 22nd field), as text; "" when it
// cannot be read. A pid and its start name one process: a pid alone may
// be another's later.
func processStart(pid int) string {
	if fields := procstat.Fields(pid); len(fields) >= 20 {
		return fields[19]
	}
	return ""
}
