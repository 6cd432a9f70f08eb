// Package linux is cordon's sandbox on Linux: bubblewrap with every
// namespace unshared but (by mode) the network's, a read-only system, the
// workspace read-write, an empty HOME, masked credentials, a seccomp filter,
// resource limits, and cordon's own init as pid 1.
package linux
