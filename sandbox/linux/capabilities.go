package linux

import "github.com/cordon-sandbox/cordon/sandbox"

// Capabilities is the Linux column of the README's platform matrix.
func Capabilities() sandbox.Table {
	return sandbox.Table{
		Platform: "Linux (bubblewrap)",
		Rows: []sandbox.Row{
			{Capability: sandbox.CapFilesystem, Status: sandbox.Ready,
				Why: "bubblewrap mount namespace: the workspace read-write but for its git repository's config and hooks, the system and exposed paths read-only, credential stores and the audit trail hidden"},
			{Capability: sandbox.CapNetOff, Status: sandbox.Ready,
				Why: "a network namespace of its own, with nothing but its own loopback"},
			{Capability: sandbox.CapNetOpen, Status: sandbox.Degraded,
				Why: "no network box: the host's network is shared; the filesystem box is kept, and the host's abstract unix sockets (X11, D-Bus, containerd shims), which no mount hides, are closed by a Landlock scope (Linux 6.12 or newer; on older kernels this mode is BLOCKED)"},
			{Capability: sandbox.CapNetRestricted, Status: sandbox.Ready,
				Why: "a private network namespace with no link out and an nftables policy: every TCP connection goes to the egress proxy's sockets inside it, DNS only to cordon's resolver; other UDP, ICMP and IPv6 are refused"},
			{Capability: sandbox.CapPerHost, Status: sandbox.Ready,
				Why: "a TCP connection that ignores HTTPS_PROXY is redirected to the proxy, which reads its original destination and decides and logs it like a CONNECT to there"},
			{Capability: sandbox.CapSyscalls, Status: sandbox.Ready,
				Why: "a seccomp filter handed to bubblewrap"},
			{Capability: sandbox.CapLimits, Status: sandbox.Ready,
				Why: "memory and processes through a cgroup v2 of their own when one is delegated, else RLIMIT_DATA and RLIMIT_NPROC; /tmp, HOME and /dev/shm are sized tmpfs; cordon keeps the deadline by killing the sandbox's pid 1"},
			{Capability: sandbox.CapProcessTree, Status: sandbox.Ready,
				Why: "a pid namespace of its own, with bwrap's init as pid 1: the deadline or a dying cordon ends every descendant, daemons included"},
		},
	}
}
