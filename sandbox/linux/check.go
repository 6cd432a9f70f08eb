//go:build linux

package linux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

// minBwrap is the oldest bubblewrap with every flag cordon passes
// (--disable-userns arrived in 0.8.0).
var minBwrap = [3]int{0, 8, 0}

// probeTimeout bounds the self-test sandbox.
const probeTimeout = 20 * time.Second

// The Linux-only capability names Check reports; the others are the
// sandbox package's Cap constants.
const (
	CapBwrap  = "bubblewrap"
	CapUserns = "unprivileged user namespaces"
	CapRunAs  = "run as an unprivileged user"
	CapAudit  = "audit log"
)

// Check reports, with real probes, whether p can be enforced here: it
// validates p's paths and starts a tiny sandbox built exactly as Run
// builds one, whose init checks from inside that writes outside the
// workspace fail, the seccomp filter answers, capabilities are gone and
// user namespaces are disabled. cordon run calls it and refuses on the
// first BLOCKED capability; cordon doctor prints it. The probes' passing
// results are reused for a while (see memo); doctor always probes anew.
func (b *Backend) Check(ctx context.Context, p *policy.Policy) sandbox.Report {
	rep := sandbox.Report{Backend: b.Name()}
	add := func(c sandbox.Capability) { rep.Capabilities = append(rep.Capabilities, c) }

	bw, version, bc := b.checkBwrap(ctx)
	rep.Version = version
	add(bc)
	if p == nil {
		add(blocked(sandbox.CapFilesystem, "no policy to check", "load a policy first"))
		return rep
	}
	if os.Geteuid() == 0 {
		if ra, err := runAs(p.RunAs); err != nil {
			add(blocked(CapRunAs, err.Error(), "set run_as in the global config to an unprivileged account"))
		} else {
			add(sandbox.Capability{Name: CapRunAs, Status: sandbox.Ready,
				Reason: fmt.Sprintf("cordon runs as root, so the command runs as %s (uid %d), never as root", ra.name, ra.uid)})
		}
	}

	var results map[string]probeResult
	if bw != "" {
		results = b.memoBox(ctx, p, add)
	} else {
		add(blocked(CapUserns, "not probed: bubblewrap is missing", bc.Fix))
		add(blocked(sandbox.CapFilesystem, "not probed: bubblewrap is missing", bc.Fix))
		add(blocked(sandbox.CapSyscalls, "not probed: bubblewrap is missing", bc.Fix))
	}
	if results != nil {
		add(fromProbe(sandbox.CapSyscalls, results, "the kernel or bwrap did not apply the filter; use a kernel with CONFIG_SECCOMP_FILTER", probeSeccomp))
	}

	switch p.Network {
	case policy.NetOff:
		if results != nil {
			add(fromProbe(sandbox.CapNetOff, results, "bwrap --unshare-net did not isolate the network; check that network namespaces are enabled (CONFIG_NET_NS)", probeNetOff))
		} else {
			add(blocked(sandbox.CapNetOff, "not probed: the sandbox did not start", "fix the capabilities above"))
		}
	case policy.NetOpen:
		add(checkNetOpen(landlockABI()))
	case policy.NetRestricted:
		if b.opts.Holder == nil {
			add(blocked(sandbox.CapNetRestricted, "the restricted network is not available in this build",
				"use --net off, or --net open to share the host network (no allowlist, no audit)"))
		} else {
			add(b.opts.Holder.Check(ctx))
		}
	default:
		add(blocked("network "+string(p.Network), fmt.Sprintf("network mode %q is not one of off, open, restricted", p.Network), "set network to off, open or restricted"))
	}
	if b.opts.AuditPath != "" {
		add(checkAudit(b.opts.AuditPath))
	}
	limits := checkLimits(p.Limits)
	if sandbox.IsFresh(ctx) {
		// cordon doctor sweeps as a run does, and says what it did.
		if parent, err := cgroupParent(); err == nil {
			limits.Reason += sweptText(sweepCgroups(parent))
		}
	}
	add(limits)
	return rep
}

// sweptText says, for doctor, what a sweep of the cgroups runs whose
// cordon was killed left did.
func sweptText(left []sandbox.LeftCgroup) string {
	var b strings.Builder
	for _, l := range left {
		what, why := l.Told()
		b.WriteString("; " + what + l.Path + ": " + why)
	}
	return b.String()
}

// checkNetOpen judges --net open on a kernel of Landlock ABI abi: without
// the scope for abstract unix sockets, the box would reach the host's.
func checkNetOpen(abi int) sandbox.Capability {
	if abi < scopeABI {
		return blocked(sandbox.CapNetOpen,
			fmt.Sprintf("the command would share the host's network namespace, and with it the host's abstract unix sockets (X11, D-Bus, containerd shims), which no mount hides; this kernel cannot close them (Landlock ABI %d, scoping needs %d)", abi, scopeABI),
			"use --net restricted with an allowlist, or --net off; --net open needs Linux 6.12 or newer with Landlock enabled (lsm= includes landlock)")
	}
	return sandbox.Capability{Name: sandbox.CapNetOpen, Status: sandbox.Degraded,
		Reason: "the command shares the host's network: it reaches any host, loopback services included, and no connection is audited; the host's abstract unix sockets are closed to it (Landlock scope)",
		Fix:    "use --net restricted with an allowlist, or --net off"}
}

// blocked is a BLOCKED capability.
func blocked(name, reason, fix string) sandbox.Capability {
	return sandbox.Capability{Name: name, Status: sandbox.Blocked, Reason: reason, Fix: fix}
}

// checkBwrap finds bubblewrap and checks its version. A version that
// passed is remembered (see memo), keyed by the binary, so a run does not
// start bwrap twice.
func (b *Backend) checkBwrap(ctx context.Context) (path, version string, c sandbox.Capability) {
	const fix = "install bubblewrap 0.8 or newer: sudo apt-get install bubblewrap"
	path, err := b.bwrap()
	if err != nil {
		return "", "", blocked(CapBwrap, err.Error(), fix)
	}
	var caps []sandbox.Capability
	found := memoised(ctx, memoKey("bwrap", []string{path}, nil), func(c sandbox.Capability) { caps = append(caps, c) },
		func(add func(sandbox.Capability)) map[string]probeResult {
			version, c := bwrapVersion(ctx, path, fix)
			add(c)
			return map[string]probeResult{"version": {Name: "version", OK: true, Detail: version}}
		})
	if len(caps) != 1 {
		return "", "", blocked(CapBwrap, "the version check of "+path+" gave no answer", fix)
	}
	if caps[0].Status == sandbox.Blocked {
		path = ""
	}
	return path, found["version"].Detail, caps[0]
}

// bwrapVersion runs bwrap --version and checks it is new enough.
func bwrapVersion(ctx context.Context, path, fix string) (string, sandbox.Capability) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// From /, with no environment: cordon's working directory is the
	// workspace, the box's to write, and an empty or relative entry of
	// an inherited LD_LIBRARY_PATH would have the loader take a library
	// planted there. (bwrap's own launches get no environment either.)
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Dir, cmd.Env = "/", []string{}
	// In a process group of its own, as cordon's other children are: a
	// program in cordon's is one the user's shell runs beside it (sharesJob).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		return "", blocked(CapBwrap, fmt.Sprintf("%s --version failed: %v", path, err), fix)
	}
	version := strings.TrimSpace(string(out))
	v, ok := parseVersion(strings.TrimPrefix(version, "bubblewrap "))
	if !ok {
		return version, blocked(CapBwrap, fmt.Sprintf("%s reports an unreadable version %q", path, version), fix)
	}
	if less(v, minBwrap) {
		return version, blocked(CapBwrap, fmt.Sprintf("%s is %s; cordon needs 0.8.0 or newer (--disable-userns)", path, version), fix)
	}
	return version, sandbox.Capability{Name: CapBwrap, Status: sandbox.Ready, Reason: version + " at " + path}
}

// parseVersion reads "X.Y.Z".
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// checkBox validates p's paths and runs the self-test sandbox. It adds the
// user-namespace and filesystem capabilities and returns the probe's
// findings by name (nil when the sandbox did not start).
func (b *Backend) checkBox(ctx context.Context, p *policy.Policy, add func(sandbox.Capability)) map[string]probeResult {
	h, err := b.host(p)
	if err != nil {
		add(blocked(sandbox.CapFilesystem, err.Error(), "fix the policy or the setting named"))
		return nil
	}
	dir, unhold, err := sandbox.MkdirHeld("", sandbox.ProbePrefix)
	if err != nil {
		add(blocked(sandbox.CapFilesystem, fmt.Sprintf("create the probe's workspace: %v", err), "make the temporary directory ($TMPDIR or /tmp) writable"))
		return nil
	}
	defer unhold()
	defer os.RemoveAll(dir)
	ws, outside := filepath.Join(dir, "workspace"), filepath.Join(dir, "outside")
	for _, d := range []string{ws, outside} {
		err := os.Mkdir(d, 0o700)
		if err == nil && h.uid != os.Getuid() {
			err = os.Chown(d, h.uid, h.gid)
		}
		if err != nil {
			add(blocked(sandbox.CapFilesystem, fmt.Sprintf("prepare the probe: %v", err), "make the temporary directory ($TMPDIR or /tmp) writable"))
			return nil
		}
	}
	if h.uid != os.Getuid() {
		if err := os.Chmod(dir, 0o755); err != nil {
			add(blocked(sandbox.CapFilesystem, fmt.Sprintf("prepare the probe: %v", err), "make the temporary directory ($TMPDIR or /tmp) writable"))
			return nil
		}
	}
	pp := *p
	if pp.Network == policy.NetRestricted {
		pp.Network = policy.NetOff // the holder's own Check covers its namespace
	}
	pp.Limits = policy.Limits{}
	h.holderNet = false
	var stderr bytes.Buffer
	s := &sandbox.Spec{Policy: &pp, Workspace: ws, Workdir: ws, Stderr: &stderr, Timeout: probeTimeout}
	l, err := build(s, h, scratchName(h), &probeMode{outside: outside})
	if err != nil {
		fix := "edit the policy entry named; paths that hold credentials or contain your home are never exposed"
		var fe interface{ Fix() string }
		if errors.As(err, &fe) {
			fix = fe.Fix()
		}
		add(blocked(sandbox.CapFilesystem, err.Error(), fix))
		return nil
	}
	// Beside the probe, the boxes killed checks and runs left behind.
	swept := make(chan []sandbox.LeftBox, 1)
	go func() { swept <- sweepOrphans(h.goarch, h.uid) }()
	var found []probeResult
	_, err = b.launch(ctx, s, h, l, &found)
	msg := strings.TrimSpace(stderr.String())
	if err != nil || found == nil {
		reason := "the self-test sandbox did not start"
		if err != nil {
			reason += ": " + err.Error()
		}
		if msg != "" {
			reason += "; bwrap said: " + msg
		}
		ucap := usernsCapability(reason)
		add(ucap)
		fix := "fix the capability above"
		if ucap.Status != sandbox.Blocked {
			fix = "run cordon doctor --json and report the message"
		}
		add(blocked(sandbox.CapFilesystem, reason, fix))
		return nil
	}
	add(sandbox.Capability{Name: CapUserns, Status: sandbox.Ready, Reason: "bwrap created a user namespace"})
	results := map[string]probeResult{}
	for _, r := range found {
		results[r.Name] = r
	}
	fsc := fromProbe(sandbox.CapFilesystem, results, "the sandbox is not built as planned; run cordon run --dry-run and report the argv with this message",
		probeReadOnly, probeWorkspace, probePidNS, probeCaps, probeNoNewPrivs, probeUserns)
	fsc.Reason += orphansText(<-swept)
	add(fsc)
	return results
}

// fromProbe is READY when every named check passed, else BLOCKED naming
// the failures.
func fromProbe(name string, results map[string]probeResult, fix string, checks ...string) sandbox.Capability {
	var bad, good []string
	for _, c := range checks {
		r, ok := results[c]
		switch {
		case !ok:
			bad = append(bad, c+": not reported")
		case !r.OK:
			bad = append(bad, c+": "+strings.TrimSpace(r.Detail))
		default:
			good = append(good, c)
		}
	}
	if len(bad) > 0 {
		return blocked(name, "probe failed: "+strings.Join(bad, "; "), fix)
	}
	return sandbox.Capability{Name: name, Status: sandbox.Ready, Reason: "probed: " + strings.Join(good, "; ")}
}

// usernsCapability explains a sandbox that did not start by the kernel
// settings that forbid unprivileged user namespaces, when one does.
func usernsCapability(failure string) sandbox.Capability {
	knobs := []struct {
		file, bad, fix string
	}{
		{"/proc/sys/kernel/unprivileged_userns_clone", "0", "sudo sysctl -w kernel.unprivileged_userns_clone=1 (Debian); persist it in /etc/sysctl.d/"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1", "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu), or install an AppArmor profile that lets bwrap create user namespaces"},
		{"/proc/sys/user/max_user_namespaces", "0", "sudo sysctl -w user.max_user_namespaces=15000"},
	}
	for _, k := range knobs {
		b, err := os.ReadFile(k.file)
		if err == nil && strings.TrimSpace(string(b)) == k.bad {
			return blocked(CapUserns, fmt.Sprintf("%s is %s: unprivileged user namespaces are disabled", k.file, k.bad), k.fix)
		}
	}
	return sandbox.Capability{Name: CapUserns, Status: sandbox.Degraded,
		Reason: "no kernel setting forbids unprivileged user namespaces, but the sandbox did not start: " + failure,
		Fix:    "see the filesystem box below"}
}

// checkAudit checks that the audit log can be appended to.
func checkAudit(path string) sandbox.Capability {
	if err := audit.CheckWritable(path); err != nil {
		return blocked(CapAudit, err.Error(), audit.Fix(path))
	}
	return sandbox.Capability{Name: CapAudit, Status: sandbox.Ready, Reason: path + " is writable"}
}

// checkLimits says how l is enforced on this machine.
func checkLimits(l policy.Limits) sandbox.Capability {
	plan := planLimits(l)
	switch {
	case plan.cgroupParent != "":
		return sandbox.Capability{Name: sandbox.CapLimits, Status: sandbox.Ready, Reason: plan.describe()}
	case plan.data == 0 && plan.nproc == 0:
		return sandbox.Capability{Name: sandbox.CapLimits, Status: sandbox.Ready, Reason: "the policy sets no memory or process limit"}
	}
	return sandbox.Capability{Name: sandbox.CapLimits, Status: sandbox.Degraded,
		Reason: "no delegated cgroup v2 with the memory and pids controllers: " + plan.describe(),
		Fix:    "run cordon from a cgroup whose parent is delegated to you with memory and pids enabled (for example systemd-run --user --scope on a cgroup v2 system)"}
}
