//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A mount the box's launch makes over a path inside a tree bound from the
// host (a mask over a secret, the read-only guard over .git/config, a
// pinned directory, a file shown in place of another) has that host
// path's dentry as its mount point. When anything on the host removes or
// replaces that path (git writes config.lock and renames it over config
// on every git config or git push -u; an editor saves by renaming; a tool
// refreshes its token file so), the kernel detaches every mount on the
// old dentry in every other mount namespace (vfs_rename and vfs_unlink
// call detach_mounts), silently: the box then sees, and may write through
// its read-write binds, what the mount hid. So a run watches each such
// host path's directory, and ends the box the moment one of them is
// removed or replaced.

// overmount is a host path whose removal or replacement takes a mount off
// the box, and the box path that mount is at. root is the host path the
// bind below it starts at: a directory between root and host renamed on
// the host takes the mount along to the new name (the kernel keeps a
// mount on its dentry), and the box then sees at host whatever the host
// puts there anew.
type overmount struct {
	host, box, root string
}

// lostReason says why a run whose overmount o was lost ended.
func (o overmount) lostReason() string {
	at := ""
	if o.box != o.host {
		at = " (" + o.box + " in the box)"
	}
	return fmt.Sprintf("%s, or a directory above it, was removed, renamed or replaced on the host while the command ran, which takes away or moves the box's mount over it%s, a mask or a guard (the kernel detaches a mount whose mount point goes, and moves one whose directory moves), so cordon ended the box; change such files while no run is going on", o.host, at)
}

// systemTrees hold no overmount worth a run: what cordon shows there is
// its network's and trust's plumbing (resolv.conf, hosts, the trust
// bundle laid over the system's), which root's daemons replace (a network
// manager rewrites resolv.conf at each change of network), and whose loss
// fails closed (every DNS query is redirected to cordon's resolver
// whatever resolv.conf names; TLS fails without cordon's CA). The box
// could not change them anyway.
var systemTrees = []string{"/etc", "/usr"}

// bwrapArity is how many arguments each bwrap option cordon passes takes.
var bwrapArity = map[string]int{
	"--bind": 2, "--ro-bind": 2, "--dev-bind": 2, "--symlink": 2, "--setenv": 2,
	"--tmpfs": 1, "--proc": 1, "--dev": 1, "--mqueue": 1, "--dir": 1, "--remount-ro": 1,
	"--size": 1, "--perms": 1, "--chdir": 1, "--hostname": 1, "--seccomp": 1, "--block-fd": 1,
	"--json-status-fd": 1, "--cap-drop": 1, "--uid": 1, "--gid": 1,
	"--unshare-user": 0, "--unshare-ipc": 0, "--unshare-pid": 0, "--unshare-net": 0,
	"--unshare-uts": 0, "--unshare-cgroup": 0, "--die-with-parent": 0, "--new-session": 0,
	"--disable-userns": 0, "--clearenv": 0,
}

// overmounts lists, from bwrap's options (no binary, no command), the
// mounts made on a host path: each mount whose nearest mount below it
// (the longest destination it lies in, the latest of equals) is a bind
// from the host, at the path it names there. A mount on a virtual one
// (tmpfs, proc, dev) or on the new root has no host path to lose.
func overmounts(opts []string) ([]overmount, error) {
	type mount struct {
		src, dst string // src is "" for a virtual file system
	}
	var mounts []mount
	var out []overmount
	for i := 0; i < len(opts); {
		op := opts[i]
		n, ok := bwrapArity[op]
		if !ok {
			return nil, fmt.Errorf("bwrap option %q: not known to the watch of the box's mounts", op)
		}
		if i+n >= len(opts) {
			return nil, fmt.Errorf("bwrap option %s: missing its arguments", op)
		}
		args := opts[i+1 : i+1+n]
		i += 1 + n
		var m mount
		switch op {
		case "--bind", "--ro-bind", "--dev-bind":
			m = mount{src: args[0], dst: args[1]}
		case "--tmpfs", "--proc", "--dev", "--mqueue":
			m = mount{dst: args[0]}
		default:
			continue
		}
		below := -1
		for j, b := range mounts {
			if within(m.dst, b.dst) && (below < 0 || len(b.dst) >= len(mounts[below].dst)) {
				below = j
			}
		}
		if below >= 0 && mounts[below].src != "" {
			b := mounts[below]
			if host := b.src + strings.TrimPrefix(m.dst, b.dst); !slices.ContainsFunc(systemTrees, func(t string) bool { return within(host, t) }) {
				out = append(out, overmount{host: host, box: m.dst, root: b.src})
			}
		}
		mounts = append(mounts, m)
	}
	return out, nil
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mountWatch watches the host paths of a box's overmounts.
type mountWatch struct {
	f *os.File
	// lost receives the first overmount removed or replaced.
	lost chan overmount
	once sync.Once
}

// watchOvermounts starts watching the directories of the overmounts'
// host paths for any of those names to be removed, renamed or renamed
// over, and each directory between an overmount's root and it for that
// directory to be renamed; nil when there is none. A name created is none of those: bwrap
// creates the mount point of a guard over an absent file itself. It fails when a directory cannot be watched: a run
// whose guards could be taken away unseen does not start.
func watchOvermounts(list []overmount) (*mountWatch, error) {
	if len(list) == 0 {
		return nil, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch the paths the box's mounts cover: %w", err)
	}
	w := &mountWatch{f: os.NewFile(uintptr(fd), "inotify"), lost: make(chan overmount, 1)}
	names := map[int32]map[string]overmount{}
	for _, o := range list {
		for _, p := range o.watched() {
			dir, name := filepath.Split(p)
			wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
			if err != nil {
				w.close()
				if errors.Is(err, unix.ENOSPC) {
					err = fmt.Errorf("%w (raise fs.inotify.max_user_watches)", err)
				}
				return nil, fmt.Errorf("watch %s, where the box has a mount over %s: %w", dir, o.host, err)
			}
			if names[int32(wd)] == nil {
				names[int32(wd)] = map[string]overmount{}
			}
			if _, ok := names[int32(wd)][name]; !ok {
				names[int32(wd)][name] = o
			}
		}
	}
	go w.read(names)
	return w, nil
}

// watched is the host path, and each directory above it below the root.
func (o overmount) watched() []string {
	out := []string{o.host}
	for p := filepath.Dir(o.host); p != o.root && p != filepath.Dir(p) && within(p, o.root); p = filepath.Dir(p) {
		out = append(out, p)
	}
	return out
}

// read sends the first watched name's event on lost, and returns when
// the watch is closed.
func (w *mountWatch) read(names map[int32]map[string]overmount) {
	buf := make([]byte, 16<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:end]), "\x00")
			off = end
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				// Events were lost: any of them may have been one of ours.
				w.report(overmount{host: "(events lost)", box: "(any)"})
				continue
			}
			if o, ok := names[ev.Wd][name]; ok {
				w.report(o)
			}
		}
	}
}

// report sends o on lost, once.
func (w *mountWatch) report(o overmount) {
	w.once.Do(func() { w.lost <- o })
}

// lostMount is the channel a run selects on: nil (never ready) for no
// watch.
func (w *mountWatch) lostMount() <-chan overmount {
	if w == nil {
		return nil
	}
	return w.lost
}

// close stops the watch.
func (w *mountWatch) close() {
	if w != nil {
		w.f.Close()
	}
}
