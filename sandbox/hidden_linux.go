package sandbox

import "golang.org/x/sys/unix"

// openEntry opens the worktree file path below rootFd through no link,
// a link itself (regular false) as an O_PATH descriptor (readEntryLink).
func openEntry(rootFd int, path string, regular bool) (int, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if !regular {
		how.Flags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	return unix.Openat2(rootFd, path, &how)
}

// readEntryLink reads the target, of size bytes, of the link openEntry
// opened as fd.
func readEntryLink(fd int, size int64) ([]byte, error) {
	data := make([]byte, size+1)
	n, err := unix.Readlinkat(fd, "", data)
	return data[:max(n, 0)], err
}
