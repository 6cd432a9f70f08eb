//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestCheckNetOpen(t *testing.T) {
	for _, c := range []struct {
		abi  int
		want sandbox.Status
	}{
		{0, sandbox.Blocked}, // no Landlock
		{5, sandbox.Blocked}, // Linux 6.10: no scopes
		{6, sandbox.Degraded},
		{7, sandbox.Degraded},
	} {
		got := checkNetOpen(c.abi)
		if got.Status != c.want || got.Name != sandbox.CapNetOpen || got.Reason == "" || got.Fix == "" {
			t.Errorf("checkNetOpen(%d) = %+v; want %s with a reason and a fix", c.abi, got, c.want)
		}
	}
}

// TestScopeAbstractUnix confines a thread of its own (which then ends):
// an abstract socket made before cannot be connected to from it, one made
// inside can. This kernel must have Landlock ABI 6: --net open needs it.
func TestScopeAbstractUnix(t *testing.T) {
	name := fmt.Sprintf("@cordon-test-scope-%d-%d", os.Getpid(), time.Now().UnixNano())
	outside, err := listenAbstract(name)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(outside)

	var hostErr, ownErr, scopeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the confined thread ends here
		if scopeErr = scopeAbstractUnix(); scopeErr != nil {
			return
		}
		hostErr = connectAbstract(name)
		own, err := listenAbstract(name + "-own")
		if err != nil {
			ownErr = err
			return
		}
		defer unix.Close(own)
		ownErr = connectAbstract(name + "-own")
	}()
	<-done
	if scopeErr != nil {
		t.Fatal(scopeErr)
	}
	if !errors.Is(hostErr, unix.EPERM) {
		t.Errorf("connect from the confined thread to a socket made outside: %v; want EPERM", hostErr)
	}
	if ownErr != nil {
		t.Errorf("connect from the confined thread to its own socket: %v", ownErr)
	}
	if err := connectAbstract(name); err != nil {
		t.Errorf("an unconfined thread cannot connect either (%v): the confinement leaked", err)
	}
}

func listenAbstract(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func connectAbstract(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: name})
}
