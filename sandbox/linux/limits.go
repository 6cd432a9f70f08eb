//go:build linux

package linux

import "github.com/cordon-sandbox/cordon/policy"

// limitPlan is how one run's memory and process limits are enforced.
type limitPlan struct {
	// data and nproc are RLIMIT_DATA and RLIMIT_NPROC for the command;
	// zero means none.
	data  int64
	nproc int
}

// rlimitPlan enforces l with RLIMIT_DATA and RLIMIT_NPROC on the command.
// RLIMIT_DATA bounds private writable memory (heap and anonymous maps) and,
// unlike RLIMIT_AS, not the address-space reservations Go, V8 and the JVM
// make up front. RLIMIT_NPROC counts every process of the user, the ones
// outside the sandbox included, not only the command's.
func rlimitPlan(l policy.Limits) limitPlan {
	return limitPlan{data: l.Memory, nproc: l.Pids}
}
