package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// openEntry opens the worktree file path below rootFd, refusing a link
// anywhere on the way (O_NOFOLLOW_ANY, macOS 11). A link itself is not
// opened: macOS reads a link through no descriptor, so an index entry of
// a link is not checked again (ENOENT: git finds no such file).
func openEntry(rootFd int, path string, regular bool) (int, error) {
	if !regular {
		return -1, unix.ENOENT
	}
	return unix.Openat(rootFd, path, unix.O_RDONLY|unix.O_NOFOLLOW_ANY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
}

// readEntryLink is never reached on macOS: openEntry opens no link.
func readEntryLink(int, int64) ([]byte, error) {
	return nil, errors.ErrUnsupported
}
