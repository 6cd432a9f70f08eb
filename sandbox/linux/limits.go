//go:build linux

package linux

// limitPlan is how one run's memory and process limits are enforced.
type limitPlan struct {
	// data and nproc are RLIMIT_DATA and RLIMIT_NPROC for the command;
	// zero means none.
	data  int64
	nproc int
}
