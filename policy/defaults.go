package policy

import "time"

// The default limits. Zero means "no limit" in an effective policy, so the
// defaults bound memory, processes and /tmp but set no deadline: agents
// run for as long as the operator lets them, and --timeout sets one.
const (
	DefaultTimeout time.Duration = 0
	DefaultMemory  int64         = 8 << 30 // 8 GiB: enough to link large Rust or C++ builds.
	DefaultPids    int           = 4096    // room for parallel builds, a wall against fork bombs.
	DefaultTmpSize int64         = 2 << 30 // 2 GiB for each tmpfs: /tmp, HOME, /dev/shm.
	// DefaultAuditBudget is 1 GiB of audit lines per session: some 2.5
	// million decisions, and a bound on what a command can make cordon
	// write to the host's disk.
	DefaultAuditBudget int64 = 1 << 30
)

// DefaultRunAs is the user a root invocation runs the command as.
const DefaultRunAs = "nobody"

// defaultEnv are host variables passed through unless a layer narrows
// them away: the search path, locale, terminal and time zone.
var defaultEnv = []string{
	"PATH",
	"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
	"TERM", "COLORTERM", "NO_COLOR",
	"TZ",
}

// defaultDenyRead are credential stores that read as empty inside the
// sandbox even when an allow_paths or expose entry covers them.
var defaultDenyRead = []string{
	"~/.ssh",
	"~/.gnupg",
	"~/.aws",
	"~/.azure",
	"~/.config/gcloud",
	"~/.config/gh",
	"~/.kube",
	"~/.docker",
	"~/.netrc",
	"~/.git-credentials",
	"~/.npmrc",
	"~/.pypirc",
	"~/.cargo/credentials.toml",
	"~/.password-store",
	"~/.vault-token",
	"~/.config/cordon",
	"~/.local/share/cordon",
	"~/.cache/cordon",
}

// Defaults returns a fresh copy of the policy that applies before any file:
// restricted network with an empty allowlist, TLS terminated everywhere,
// the default limits, environment names and read denials.
func Defaults() *Policy {
	return &Policy{
		Network:   NetRestricted,
		Allow:     []string{},
		Terminate: TerminateAll,
		DenyRead:  append([]string(nil), defaultDenyRead...),
		Env:       append([]string(nil), defaultEnv...),
		RunAs:     DefaultRunAs,
		Limits: Limits{
			Timeout:     DefaultTimeout,
			Memory:      DefaultMemory,
			Pids:        DefaultPids,
			TmpSize:     DefaultTmpSize,
			AuditBudget: DefaultAuditBudget,
		},
	}
}
