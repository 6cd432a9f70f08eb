package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/session"
)

func init() { register("proxy", newProxyCmd) }

func newProxyCmd() *cobra.Command {
	var (
		listen, auditPath string
		pf                policyFlags
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the egress proxy on loopback for agents that honour HTTPS_PROXY",
		Long: `Run cordon's egress proxy on loopback, with no sandbox. When it is ready it
prints one shell line per variable a proxy-aware client needs (the proxy URL
carries a fresh session token), then serves until SIGINT or SIGTERM:

  eval "$(cordon proxy --allow api.example.com &)"

Every connection is judged against the allowlist and logged to the audit log.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, _, err := pf.loadFrom(policy.LoadOptions{OptionalWorkspace: true})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			px, err := session.StartProxy(ctx, session.Options{Policy: p, Listen: listen, AuditPath: auditPath, EphemeralCA: pf.ephemeralCA, Credentials: pf.credentials})
			if err != nil {
				return err
			}
			printExports(cmd.OutOrStdout(), px.Env(px.URL()))
			fmt.Fprintf(cmd.ErrOrStderr(), "cordon: proxy on %s, session %s, audit %s\ncordon: trust bundle %s\ncordon: allowed: %s\n",
				px.Addr, px.Audit.Session(), px.Audit.Path(), px.Bundle, strings.Join(px.Rules.Names(), " "))
			<-ctx.Done()
			return px.Close()
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().StringVar(&auditPath, "audit", "", "audit log file (default $CORDON_AUDIT or ~/.local/state/cordon/audit.jsonl)")
	pf.register(cmd)
	return cmd
}

// printExports writes NAME=value pairs as shell export lines, single-quoted.
func printExports(w io.Writer, env []string) {
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "export %s=%s\n", name, shellQuote(val))
	}
}

// shellQuote single-quotes s for POSIX shells.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
