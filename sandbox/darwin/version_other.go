//go:build !darwin

package darwin

// osVersion is empty off macOS.
func osVersion() string { return "" }
