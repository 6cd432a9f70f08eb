package darwin

import (
	"fmt"
	"strings"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// Capabilities is the macOS column of the README's platform matrix.
func Capabilities() sandbox.Table {
	return sandbox.Table{
		Platform: "macOS (Seatbelt)",
		Rows: []sandbox.Row{
			{Capability: sandbox.CapFilesystem, Status: sandbox.Ready,
				Why: "a Seatbelt profile: the workspace (but for its git repository's config and hooks) and a per-session TMPDIR read-write, the system and exposed paths read-only, credential stores and the audit trail denied; deny_read paths fail with EPERM instead of reading empty, and /tmp is the host's, so it is not writable"},
			{Capability: sandbox.CapNetOff, Status: sandbox.Ready,
				Why: "no network rule: every connection is refused, the host's loopback and unix sockets included"},
			{Capability: sandbox.CapNetOpen, Status: sandbox.Degraded,
				Why: "no network box: outbound IP to any host; unix sockets (ssh-agent, Docker) stay closed and the filesystem box is kept"},
			{Capability: sandbox.CapNetRestricted, Status: sandbox.Ready,
				Why: "the only destination allowed is the egress proxy on the loopback: proxy-aware clients are decided host by host, every other connection is refused"},
			{Capability: sandbox.CapPerHost, Status: sandbox.Degraded,
				Why: "no transparent capture on macOS: a client that ignores HTTPS_PROXY cannot connect at all (it fails closed)"},
			{Capability: sandbox.CapSyscalls, Status: sandbox.NotApplicable,
				Why: "Seatbelt has no system call filter; the profile mediates operations instead (files, Mach services, sysctls, signals)"},
			{Capability: sandbox.CapLimits, Status: sandbox.Degraded,
				Why: "the deadline only: macOS enforces neither RLIMIT_AS nor a per-tree process count, and TMPDIR is on the host's disk, so memory, pids and tmp_size are not enforced"},
			{Capability: sandbox.CapProcessTree, Status: sandbox.Degraded,
				Why: "the command runs in a session and process group of its own, killed at the deadline and when it exits; a descendant that starts its own session, or a killed cordon, leaves processes behind"},
		},
	}
}

// policyCapabilities says, without probing anything, how well p can be
// enforced by Seatbelt.
func policyCapabilities(p *policy.Policy) []sandbox.Capability {
	var caps []sandbox.Capability
	switch p.Network {
	case "", policy.NetOff:
		caps = append(caps, sandbox.Capability{Name: "network", Status: sandbox.Ready,
			Reason: "network off: the profile allows no connection"})
	case policy.NetOpen:
		caps = append(caps, sandbox.Capability{Name: "network", Status: sandbox.Degraded,
			Reason: "network open: the command reaches any host directly, with no network box; the filesystem box is kept",
			Fix:    "use network: restricted with an allowlist to put the network in the box too"})
	case policy.NetRestricted:
		caps = append(caps,
			sandbox.Capability{Name: "network", Status: sandbox.Ready,
				Reason: "network restricted: the profile allows connections to the egress proxy on the loopback only"},
			sandbox.Capability{Name: "network.transparent", Status: sandbox.Degraded,
				Reason: "macOS has no transparent capture: clients that ignore HTTPS_PROXY cannot connect at all (they fail closed)",
				Fix:    "configure such clients to use the proxy, or run on Linux, where every connection is captured"})
	default:
		caps = append(caps, sandbox.Capability{Name: "network", Status: sandbox.Blocked,
			Reason: fmt.Sprintf("network mode %q is not one of off, restricted, open", p.Network),
			Fix:    "set network to off, restricted or open"})
	}
	var unenforced []string
	for _, l := range []struct {
		key string
		set bool
	}{
		{"limits.memory", p.Limits.Memory > 0},
		{"limits.pids", p.Limits.Pids > 0},
		{"limits.tmp_size", p.Limits.TmpSize > 0},
	} {
		if l.set {
			unenforced = append(unenforced, l.key)
		}
	}
	if len(unenforced) > 0 {
		list := strings.Join(unenforced, ", ")
		caps = append(caps, sandbox.Capability{Name: "limits", Status: sandbox.Degraded,
			Reason: list + ": not enforced on macOS, which has no unprivileged way to bound a process tree's memory, processes or disk",
			Fix:    "run on Linux for cgroup limits, or set " + list + " to 0 to run without them knowingly"})
	}
	if p.Limits.Timeout > 0 {
		caps = append(caps, sandbox.Capability{Name: "limits.timeout", Status: sandbox.Ready,
			Reason: "cordon kills the command's process group at the deadline"})
	}
	return caps
}
