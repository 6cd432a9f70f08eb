//go:build linux

package linux

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A box that shares the host's network namespace (--net open) also shares
// its abstract unix sockets: the ones with no file behind them, which no
// mount can hide. X11 servers, some D-Bus buses and containerd's shims
// listen on them, and a command that reached X11 could type into the
// user's desktop. Landlock (ABI 6, Linux 6.12) scopes them: a process in a
// Landlock domain connects only to abstract sockets created inside it.

// scopeABI is the first Landlock ABI with LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET.
const scopeABI = 6

// landlockABI is the kernel's Landlock ABI version; 0 when Landlock is
// missing or disabled.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// rulesetAttr is struct landlock_ruleset_attr up to its scoped field.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// scopeAbstractUnix puts the calling thread, and every process it starts
// from now on, in a Landlock domain that may connect only to abstract unix
// sockets created inside it. It sets no_new_privs on the thread, as
// Landlock requires of an unprivileged caller. The thread stays confined:
// it must not run other goroutines afterwards.
func scopeAbstractUnix() error {
	if abi := landlockABI(); abi < scopeABI {
		return fmt.Errorf("close the host's abstract unix sockets: the kernel's Landlock ABI is %d; scoping them needs ABI %d (Linux 6.12 or newer, with Landlock enabled)", abi, scopeABI)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("close the host's abstract unix sockets: set no_new_privs: %w", err)
	}
	attr := rulesetAttr{scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("close the host's abstract unix sockets: create a Landlock ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("close the host's abstract unix sockets: enforce the Landlock ruleset: %w", errno)
	}
	return nil
}
