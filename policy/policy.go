// Package policy holds what a session may do: its network mode and
// allowlist, filesystem rules, credentials and limits, how those layer
// (global config, project file, one-shot flags), and the pure functions that
// judge a host against them.
package policy

import "time"

// NetMode is how a sandboxed command reaches the network.
type NetMode string

// The three network modes.
const (
	NetOff        NetMode = "off"
	NetOpen       NetMode = "open"
	NetRestricted NetMode = "restricted"
)

// Policy is one session's effective rules, after layering.
type Policy struct {
	// Network is the mode for cordon run; cordon proxy ignores it.
	Network NetMode `mapstructure:"network" yaml:"network" json:"network"`
	// Allow and Deny are host patterns (see ParsePattern). Deny wins.
	Allow []string `mapstructure:"allow" yaml:"allow" json:"allow"`
	Deny  []string `mapstructure:"deny" yaml:"deny" json:"deny"`
	// DenyPrivate refuses RFC 1918, ULA and CGNAT addresses too.
	DenyPrivate bool `mapstructure:"deny_private" yaml:"deny_private" json:"deny_private"`
	// Terminate is "all" (terminate TLS on every allowed CONNECT) or "none".
	Terminate string `mapstructure:"terminate" yaml:"terminate" json:"terminate"`
	// Exclude lists patterns tunnelled opaquely (pinned clients, mTLS).
	Exclude []string `mapstructure:"exclude" yaml:"exclude" json:"exclude"`
	// Resolve pins names to addresses ("api.internal=10.0.0.7"), consulted
	// before DNS, like curl's --resolve.
	Resolve []string `mapstructure:"resolve" yaml:"resolve" json:"resolve,omitempty"`
	// ExtraCA lists PEM files trusted for upstreams and added to the sandbox bundle.
	ExtraCA []string `mapstructure:"extra_ca" yaml:"extra_ca" json:"extra_ca"`

	// Expose lists host paths mounted read-only (toolchains outside /usr).
	Expose []string `mapstructure:"expose" yaml:"expose" json:"expose"`
	// AllowPaths lists extra host paths, "PATH" read-only or "PATH:rw".
	AllowPaths []string `mapstructure:"allow_paths" yaml:"allow_paths" json:"allow_paths"`
	// DenyRead lists paths that read as empty inside the sandbox.
	DenyRead []string `mapstructure:"deny_read" yaml:"deny_read" json:"deny_read"`
	// ReadOnly lists paths in the workspace, relative to its root, that the
	// command may read but not write, rename or remove.
	ReadOnly []string `mapstructure:"read_only" yaml:"read_only" json:"read_only"`
	// DenyCommands lists commands refused by name or by same file.
	DenyCommands []string `mapstructure:"deny_commands" yaml:"deny_commands" json:"deny_commands"`
	// Env lists host variables passed into the sandbox by name.
	Env []string `mapstructure:"env" yaml:"env" json:"env"`
	// RunAs is the user a root invocation runs the command as.
	RunAs string `mapstructure:"run_as" yaml:"run_as" json:"run_as"`
	// Limits bounds time, memory and processes.
	Limits Limits `mapstructure:"limits" yaml:"limits" json:"limits"`

	// Credentials are the masked secrets this config knows about.
	Credentials []Credential `mapstructure:"credentials" yaml:"credentials" json:"credentials"`
}

// Limits bounds one run. Zero means the default.
type Limits struct {
	Timeout time.Duration `mapstructure:"timeout" yaml:"timeout" json:"timeout"`
	// Memory and TmpSize are bytes.
	Memory  int64 `mapstructure:"memory" yaml:"memory" json:"memory"`
	Pids    int   `mapstructure:"pids" yaml:"pids" json:"pids"`
	TmpSize int64 `mapstructure:"tmp_size" yaml:"tmp_size" json:"tmp_size"`
	// AuditBudget bounds the bytes one session may append to the audit
	// log; past it every later connection is denied, unlogged.
	AuditBudget int64 `mapstructure:"audit_budget" yaml:"audit_budget" json:"audit_budget"`
}

// Credential binds one secret to the hosts it may be sent to.
type Credential struct {
	Name   string `mapstructure:"name" yaml:"name" json:"name"`
	Source Source `mapstructure:"source" yaml:"source" json:"source"`
	// Hosts are patterns; injection happens only toward them.
	Hosts []string `mapstructure:"hosts" yaml:"hosts" json:"hosts"`
	// Header is a template such as "Authorization: Bearer {}".
	Header string `mapstructure:"header" yaml:"header" json:"header,omitempty"`
	// BasicAuth, when set, is the user name; the secret is the password.
	BasicAuth string `mapstructure:"basic_auth" yaml:"basic_auth" json:"basic_auth,omitempty"`
	// Query is a query parameter name that carries the secret.
	Query string `mapstructure:"query" yaml:"query" json:"query,omitempty"`
	// Path is a template such as "/bot{}/": the secret goes in the URL
	// path, at the {} of a path that starts as the template does.
	Path string `mapstructure:"path" yaml:"path" json:"path,omitempty"`
	// Env is the variable the sandbox sees, holding a placeholder.
	Env string `mapstructure:"env" yaml:"env" json:"env"`
	// PlaceholderPrefix keeps the shape SDKs validate, e.g. "sk-".
	PlaceholderPrefix string `mapstructure:"placeholder_prefix" yaml:"placeholder_prefix" json:"placeholder_prefix,omitempty"`
	// AllowPlaintext permits injection over plain HTTP.
	AllowPlaintext bool `mapstructure:"allow_plaintext" yaml:"allow_plaintext" json:"allow_plaintext,omitempty"`
	// Files are shown inside the sandbox, at the same path, with every
	// secret replaced by its placeholder (e.g. ~/.npmrc holding a token).
	Files []string `mapstructure:"files" yaml:"files" json:"files,omitempty"`
}

// Source says where a secret's real value comes from: exactly one field.
type Source struct {
	Env     string `mapstructure:"env" yaml:"env" json:"env,omitempty"`
	File    string `mapstructure:"file" yaml:"file" json:"file,omitempty"`
	Command string `mapstructure:"command" yaml:"command" json:"command,omitempty"`
}
