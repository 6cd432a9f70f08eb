package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

func init() { register("doctor", newDoctorCmd) }

// exitDoctorBlocked is cordon doctor's exit code when the policy cannot run.
const exitDoctorBlocked = 1

// doctorReport is cordon doctor --json's output.
type doctorReport struct {
	sandbox.Report
	// Verdict is the worst status: READY, DEGRADED or BLOCKED.
	Verdict sandbox.Status `json:"verdict"`
	Network policy.NetMode `json:"network"`
	Sources policy.Sources `json:"sources"`
	// AllowedDomains is the effective allowlist: the policy's entries plus
	// the hosts of the credentials named with --credential.
	AllowedDomains []string `json:"allowedDomains"`
	// Note says what doctor could not take into account.
	Note string `json:"note,omitempty"`
}

func newDoctorCmd() *cobra.Command {
	var (
		jsonOut         bool
		net, config, ap string
		credentials     []string
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say whether the configured policy can be enforced on this machine, and how to fix what cannot",
		Long: `Check, with real probes, each capability the policy needs: the launcher, user
namespaces, the filesystem box (a tiny sandbox is started and a write outside
its workspace must fail), the system call filter, the network mode, the audit
log and the limits. Each is READY, DEGRADED or BLOCKED, with the reason and
the fix. cordon run calls the same check and refuses what doctor calls
BLOCKED. Exits 1 when the policy is BLOCKED.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o policy.Overrides
			if net != "" {
				m, err := policy.ParseNetMode(net)
				if err != nil {
					return fmt.Errorf("--net: %w", err)
				}
				o.Network = &m
			}
			if ap == "" {
				var err error
				if ap, err = audit.DefaultPath(); err != nil {
					return err
				}
			}
			var out doctorReport
			p, src, err := policy.Load(policy.LoadOptions{ConfigPath: config, Overrides: o})
			if err != nil {
				// The working directory may be refused as a workspace ($HOME, /):
				// check the global policy from an empty directory instead.
				dir, unhold, derr := sandbox.MkdirHeld("", sandbox.DoctorPrefix)
				if derr != nil {
					return err
				}
				defer unhold()
				defer os.RemoveAll(dir)
				var lerr error
				if p, src, lerr = policy.Load(policy.LoadOptions{ConfigPath: config, Workdir: dir, Overrides: o}); lerr != nil {
					return err
				}
				out.Note = "no project file was read: " + err.Error()
			}
			if out.AllowedDomains, err = allowedDomains(p, credentials); err != nil {
				return err
			}
			out.Report = newBackend(ap).Check(sandbox.Fresh(cmd.Context()), p)
			out.Report.Capabilities = append(out.Report.Capabilities, terminalCapability())
			out.Network, out.Sources, out.Verdict = p.Network, src, verdict(out.Report)
			if jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				printDoctor(cmd.OutOrStdout(), out)
			}
			if out.Verdict == sandbox.Blocked {
				return exitError{code: exitDoctorBlocked}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as one JSON object")
	cmd.Flags().StringVar(&net, "net", "", "check this network mode instead of the configured one: off, open or restricted")
	cmd.Flags().StringVar(&config, "config", "", "global config file (default $CORDON_CONFIG or ~/.config/cordon/config.yaml)")
	cmd.Flags().StringArrayVar(&credentials, "credential", nil, "include the hosts of this configured credential in the effective allowlist, as cordon run --credential would (repeatable)")
	cmd.Flags().StringVar(&ap, "audit", "", "audit log file (default $CORDON_AUDIT or ~/.local/state/cordon/audit.jsonl)")
	return cmd
}

// allowedDomains is p's effective allowlist with the hosts of the named
// credentials, each entry in its canonical form, as cordon run --json and
// cordon proxy show it. As written, a project file's entry could end in
// a carriage return (it parses: the blanks around an entry are trimmed),
// which on the terminal hid the entries before it behind those after.
func allowedDomains(p *policy.Policy, credentials []string) ([]string, error) {
	allow, err := p.EffectiveAllow(credentials)
	if err != nil {
		return nil, err
	}
	rules, err := policy.Compile(allow, nil)
	if err != nil {
		return nil, err
	}
	return rules.Names(), nil
}

// verdict is the worst status in r.
func verdict(r sandbox.Report) sandbox.Status {
	v := sandbox.Ready
	for _, c := range r.Capabilities {
		switch c.Status {
		case sandbox.Blocked:
			return sandbox.Blocked
		case sandbox.Degraded:
			v = sandbox.Degraded
		}
	}
	return v
}

// printDoctor writes the report as a table with reasons and fixes. What
// names a path is printed escaped (termtext), each on its line: a
// project file's path is in the workspace, whose directories a sandboxed
// command may have made and named, a reason may name where a link there
// points, and the note quotes a project file's error, with its text.
func printDoctor(w io.Writer, r doctorReport) {
	fmt.Fprintf(w, "sandbox:   %s %s\n", r.Backend, r.Version)
	fmt.Fprintf(w, "network:   %s\n", r.Network)
	if r.Network == policy.NetRestricted {
		fmt.Fprintf(w, "allowed:   %s\n", strings.Join(r.AllowedDomains, " "))
	}
	config := r.Sources.Global
	if !r.Sources.GlobalRead {
		config += " (absent: defaults apply)"
	}
	fmt.Fprintf(w, "config:    %s\n", termtext.Printable(config, 0))
	for _, f := range r.Sources.Projects {
		fmt.Fprintf(w, "project:   %s\n", termtext.Printable(f, 0))
	}
	if r.Note != "" {
		fmt.Fprintf(w, "note:      %s\n", termtext.Printable(r.Note, 0))
	}
	fmt.Fprintln(w)
	for _, c := range r.Capabilities {
		fmt.Fprintf(w, "%-9s %s: %s\n", c.Status, c.Name, termtext.Printable(c.Reason, 0))
		if c.Fix != "" && c.Status != sandbox.Ready {
			fmt.Fprintf(w, "%-9s fix: %s\n", "", termtext.Printable(c.Fix, 0))
		}
	}
	fmt.Fprintf(w, "\nverdict: %s\n", r.Verdict)
}
