// Package audit is cordon's per-session log: one JSON object per line, one
// line per decision, written before bytes flow and failing closed.
package audit

import "time"

// Type says what a record is about.
type Type string

// The record types.
const (
	// TypeDecision is one allow or deny on a connection or request.
	TypeDecision Type = "decision"
	// TypeClose ends a connection or request with its byte counts; one
	// cordon refused on its way carries Decision Deny and the reason.
	TypeClose Type = "close"
	// TypeInject says a credential was put on a request.
	TypeInject Type = "inject"
	// TypeBlock is a command refused before it started.
	TypeBlock Type = "block"
	// TypeLaunch is written (and synced) before a sandbox starts.
	TypeLaunch Type = "launch"
	// TypeExit ends a sandboxed run.
	TypeExit Type = "exit"
	// TypeSession marks a proxy session's start.
	TypeSession Type = "session"
	// TypeBudget says the session's audit budget is spent: every later
	// connection is denied, unlogged.
	TypeBudget Type = "budget"
	// TypeRemoved is a file the sandboxed command made that cordon
	// removed when the run ended (see sandbox.Unmade), or the cgroup of
	// an earlier run whose cordon was killed (sandbox.LeftCgroup): Path
	// and Detail say which and why.
	TypeRemoved Type = "removed"
	// TypeSetAside is the .git of a repository the sandboxed command made
	// (at a guarded root, or nested in the workspace), or whose config or
	// hooks it changed, or of a submodule checkout it filled or
	// registered (or the HEAD of a directory git takes for a git
	// directory by its layout), which cordon renamed when the run ended
	// (see sandbox.Aftercare); or what cordon could not check, remove or
	// set aside then (an index, a directory, a file that must not exist):
	// Path and Detail say which and why.
	TypeSetAside Type = "set_aside"
	// TypeClosed is a file or directory the sandboxed command made in the
	// workspace writable by other local users, which cordon took that
	// write permission off when the run ended (see sandbox.WriteClosed):
	// Path and Detail say which and why.
	TypeClosed Type = "closed"
	// TypeHidden is what the sandboxed command hid from git status and
	// git diff in a repository of the workspace, which cordon reports
	// when the run ended and does not undo (see sandbox.HiddenPath): a
	// file whose index entry it flagged skip-worktree or assume-valid,
	// an exclude file it changed. Path and Detail say which and why.
	TypeHidden Type = "hidden"
	// TypeTerminal is a control string the sandboxed command wrote to the
	// user's terminal that cordon dropped (a clipboard write, OSC 52;
	// tmux's passthrough): Detail says which. A run logs each kind once.
	TypeTerminal Type = "terminal"
)

// Kind says which path a decision was taken on.
type Kind string

// The decision kinds. A request inside a terminated tunnel carries its
// tunnel's kind (connect or transparent) and a method and path.
const (
	KindConnect     Kind = "connect"
	KindHTTP        Kind = "http"
	KindTransparent Kind = "transparent"
	KindDNS         Kind = "dns"
)

// Record is one audit line. Fields that do not apply are left out.
// It never holds a secret, a placeholder or a query string.
type Record struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	Type    Type      `json:"type"`
	Kind    Kind      `json:"kind,omitempty"`
	// ID ties a decision to its close line within a session.
	ID     uint64 `json:"id,omitempty"`
	Client string `json:"client,omitempty"`

	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
	// Addr is the address actually dialled.
	Addr string `json:"addr,omitempty"`

	// Decision is "allow" or "deny".
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Rule     string `json:"rule,omitempty"`

	Method string `json:"method,omitempty"`
	// Path never includes the query string.
	Path   string `json:"path,omitempty"`
	Status int    `json:"status,omitempty"`

	BytesUp    int64 `json:"bytes_up,omitempty"`
	BytesDown  int64 `json:"bytes_down,omitempty"`
	DurationMS int64 `json:"duration_ms,omitempty"`

	// Credential names an injected or misrouted credential (never its value).
	Credential string `json:"credential,omitempty"`

	// Launch and exit fields.
	Command  []string `json:"command,omitempty"`
	Workdir  string   `json:"workdir,omitempty"`
	Network  string   `json:"network,omitempty"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Signal   string   `json:"signal,omitempty"`
	Outcome  string   `json:"outcome,omitempty"`
}

// Allow and Deny are the two values of Record.Decision.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Verdict maps a boolean decision to Allow or Deny.
func Verdict(allow bool) string {
	if allow {
		return Allow
	}
	return Deny
}
