package darwin

import "golang.org/x/sys/unix"

// osVersion is macOS's product version, such as "15.1".
func osVersion() string {
	v, _ := unix.Sysctl("kern.osproductversion")
	return v
}
