package sandbox

// processStart is when process pid started; macOS has no /proc to read it
// from, so "", unknown: a live pid is taken for the process that wrote
// it.
func processStart(pid int) string { return "" }
