//go:build linux

package holder

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair is a socket pair like the launcher's and the holder's.
func pair(t *testing.T) (launcher, holder int) {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sp[0]); unix.Close(sp[1]) })
	return sp[0], sp[1]
}

// pipes makes n pipes, closed when the test ends, and returns their read
// and write ends.
func pipes(t *testing.T, n int) (r, w []*os.File) {
	t.Helper()
	for range n {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Close(); pw.Close() })
		r, w = append(r, pr), append(w, pw)
	}
	return r, w
}

// TestLaunchRoundTrip: what SendLaunch sends, receiveLaunch reads back:
// the command line, and the descriptors in order (stdio, then one for each
// named number), each a fresh close-on-exec copy of the file sent.
func TestLaunchRoundTrip(t *testing.T) {
	l, h := pair(t)
	_, files := pipes(t, 6)
	sent := Launch{Argv: []string{"/usr/bin/bwrap", "--args", "6", "--", "true"}, LaunchFDs: []int{3, 4, 6}}
	if err := SendLaunch(l, sent, [3]*os.File(files[:3]), files[3:]); err != nil {
		t.Fatal(err)
	}
	got, fds, err := receiveLaunch(h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Argv, " ") != strings.Join(sent.Argv, " ") || len(got.LaunchFDs) != 3 || len(fds) != 6 {
		t.Fatalf("received %+v with %d descriptors", got, len(fds))
	}
	for i, fd := range fds {
		defer unix.Close(fd)
		var a, b unix.Stat_t
		if err := unix.Fstat(fd, &a); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fstat(int(files[i].Fd()), &b); err != nil {
			t.Fatal(err)
		}
		if a.Ino != b.Ino {
			t.Errorf("descriptor %d is not the file sent in its place", i)
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is not close-on-exec (flags %d, %v)", i, flags, err)
		}
	}
}

// TestLaunchRefusals: a launch the holder must not act on is an error; a
// launcher that closes its end sends no launch.
func TestLaunchRefusals(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdio := [3]*os.File{null, null, null}
	for _, tc := range []struct {
		name string
		l    Launch
		want string
	}{
		{"no command", Launch{LaunchFDs: []int{3}}, "names no command"},
		{"stdio's number", Launch{Argv: []string{"bwrap"}, LaunchFDs: []int{2}}, "descriptor 2"},
		{"past bwrap's", Launch{Argv: []string{"bwrap"}, LaunchFDs: []int{SocketsFD}}, fmt.Sprintf("descriptor %d", SocketsFD)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h := pair(t)
			if err := SendLaunch(l, tc.l, stdio, []*os.File{null}); err != nil {
				t.Fatal(err)
			}
			_, _, err := receiveLaunch(h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("receiveLaunch: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if err := SendLaunch(0, Launch{Argv: []string{"bwrap"}, LaunchFDs: []int{3, 4}}, stdio, []*os.File{null}); err == nil {
		t.Error("SendLaunch sent two numbers with one descriptor")
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[1])
	unix.Close(sp[0])
	if got, _, err := receiveLaunch(sp[1]); got != nil || err != nil {
		t.Errorf("after the launcher closed: %+v, %v; want no launch and no error", got, err)
	}
	// A launcher that ends before it took the network's sockets (a run
	// refused meanwhile) resets the pair: it gave up all the same.
	reset, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(reset[1])
	if _, err := unix.Write(reset[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	unix.Close(reset[0])
	if got, _, err := receiveLaunch(reset[1]); got != nil || err != nil {
		t.Errorf("after the launcher ended with the holder's message unread: %+v, %v; want no launch and no error", got, err)
	}
}

// TestReceiveSockets: the launcher takes exactly the holder's SocketCount
// descriptors; a message with another count, or a holder that ended
// first, is an error that says so.
func TestReceiveSockets(t *testing.T) {
	files, _ := pipes(t, SocketCount)
	deadline := time.Now().Add(5 * time.Second)
	for _, tc := range []struct {
		name string
		send []*os.File
		want string
	}{
		{"all", files, ""},
		{"one short", files[:SocketCount-1], "want 4"},
		{"none", nil, "ended before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.send != nil {
				if err := sendFiles(sp[1], []byte{1}, tc.send); err != nil {
					t.Fatal(err)
				}
			}
			unix.Close(sp[1]) // the holder's end
			got, err := ReceiveSockets(os.NewFile(uintptr(sp[0]), "launcher"), deadline)
			switch {
			case tc.want == "" && (err != nil || len(got) != SocketCount):
				t.Fatalf("got %d sockets, %v", len(got), err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
			for _, f := range got {
				f.Close()
			}
		})
	}
}
