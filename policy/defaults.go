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
// sandbox even when an allow_paths or expose entry covers them. A store
// inside a tree a toolchain is exposed for is named as a file (Maven's
// settings.xml, not ~/.m2, whose repository builds need), so the rest
// of the tree is seen. No layer removes one; a credential's files:
// shows one masked.
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
	"~/.local/state/cordon",
	"~/.cache/cordon",
	// Desktop keyrings, and browsers' and mail clients' profiles: session
	// cookies and saved logins, readable without the user's password on
	// Linux (Firefox's logins.json with its key4.db, Chromium's with no
	// keyring).
	"~/.mozilla",
	"~/.thunderbird",
	"~/.config/google-chrome",
	"~/.config/chromium",
	"~/.config/BraveSoftware",
	"~/.config/microsoft-edge",
	"~/.config/vivaldi",
	"~/.local/share/keyrings",
	"~/.local/share/kwalletd",
	// Cloud, storage and deployment CLIs.
	"~/.config/rclone/rclone.conf",
	"~/.s3cfg",
	"~/.boto",
	"~/.oci",
	"~/.config/doctl",
	"~/.netlify",
	"~/.config/netlify",
	"~/.vercel",
	"~/.local/share/com.vercel.cli",
	"~/.terraformrc",
	"~/.terraform.d/credentials.tfrc.json",
	"~/.pulumi/credentials.json",
	"~/.config/containers/auth.json",
	"~/.config/helm/repositories.yaml",
	"~/.config/helm/registry/config.json",
	// Code hosts.
	"~/.config/hub",
	"~/.config/glab-cli",
	// Package registries and build tools.
	"~/.m2/settings.xml",
	"~/.m2/settings-security.xml",
	"~/.gradle/gradle.properties",
	"~/.yarnrc.yml",
	"~/.composer/auth.json",
	"~/.config/composer/auth.json",
	"~/.config/configstore",
	// Password managers.
	"~/.config/op",
	"~/.op",
	"~/.config/Bitwarden CLI",
	// Coding agents' logins (OAuth refresh tokens): give an agent in the
	// box its key as a masked credential instead.
	"~/.claude/.credentials.json",
	"~/.codex/auth.json",
	"~/.gemini/oauth_creds.json",
	"~/.config/github-copilot/hosts.json",
	"~/.config/github-copilot/apps.json",
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
