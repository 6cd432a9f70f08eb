package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/termtext"
	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/session"
)

func init() { register("proxy", newProxyCmd) }

func newProxyCmd() *cobra.Command {
	var (
		listen, auditPath string
		nonlocal          bool
		pf                policyFlags
	)
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the egress proxy on loopback for agents that honour HTTPS_PROXY",
		Long: `Run cordon's egress proxy on loopback, with no sandbox. When it is ready it
prints one shell line per variable a proxy-aware client needs (the proxy URL
carries a fresh session token), then serves until SIGINT, SIGTERM or SIGHUP:

  eval "$(cordon proxy --allow api.example.com &)"

Every connection is judged against the allowlist and logged to the audit log.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := listenAddr(listen, nonlocal)
			if err != nil {
				return err
			}
			if err := exportsLost(cmd.OutOrStdout()); err != nil {
				return err
			}
			p, _, err := pf.loadFrom(policy.LoadOptions{OptionalWorkspace: true})
			if err != nil {
				return err
			}
			// The program that read the export lines may go, and with it
			// the reader of stderr, where the proxy still has things to say.
			outliveReaders()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			px, err := session.StartProxy(ctx, session.Options{Policy: p, Listen: addr, AuditPath: auditPath, EphemeralCA: pf.ephemeralCA, Credentials: pf.credentials})
			if err != nil {
				return err
			}
			if err := printExports(cmd.OutOrStdout(), px.Env(px.URL())); err != nil {
				// No one has the token: a proxy no client can use.
				return errors.Join(fmt.Errorf("print the export lines: %w", err), px.Close())
			}
			if err := releaseStdout(cmd.OutOrStdout()); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "cordon: %v: a shell reading the export lines (eval \"$(cordon proxy &)\") waits until the proxy ends\n", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "cordon: proxy on %s, session %s, audit %s\ncordon: trust bundle %s\ncordon: allowed: %s\n",
				px.Addr, px.Audit.Session(), px.Audit.Path(), px.Bundle, strings.Join(px.Rules.Names(), " "))
			<-ctx.Done()
			return px.Close()
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on: a loopback IP and a port (0 picks a free one)")
	cmd.Flags().BoolVar(&nonlocal, "listen-nonlocal", false, "let --listen name an address other machines reach; they would send the session's token in clear")
	cmd.Flags().StringVar(&auditPath, "audit", "", "audit log file (default $CORDON_AUDIT or ~/.local/state/cordon/audit.jsonl)")
	pf.register(cmd)
	return cmd
}

// listenAddr checks a --listen address: an IP address (or localhost) and a
// port, on the loopback unless nonlocal. A client on another machine
// would send the session's token in clear, and through the proxy it
// could spend the session's credentials.
func listenAddr(addr string, nonlocal bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %v; write an address and a port, such as 127.0.0.1:3128 or [::1]:0", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--listen %q: port %q is not a number from 0 to 65535 (0 picks a free one)", addr, port)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case host == "":
		// All of the machine's addresses, as 0.0.0.0 and [::].
	case err != nil:
		return "", fmt.Errorf("--listen %q: %q is not an IP address; the proxy listens on an address, not a name, such as 127.0.0.1", addr, host)
	case ip.IsLoopback():
		return net.JoinHostPort(ip.String(), port), nil
	}
	if !nonlocal {
		return "", fmt.Errorf("--listen %q: not a loopback address, so other machines could reach the proxy, send the session's token in clear and spend its credentials; listen on 127.0.0.1 or [::1], or pass --listen-nonlocal if that is what you want", addr)
	}
	return net.JoinHostPort(host, port), nil
}

// releaseStdout lets go of standard output once the export lines are
// on it, putting /dev/null in its place: the shell that reads them,
// eval "$(cordon proxy &)", waits for it to close, and held for the
// proxy's life it waited until the proxy had ended, so the lines it then
// set named a proxy that was gone. Any other writer (a test's buffer) is
// left alone.
func releaseStdout(w io.Writer) error {
	if w != io.Writer(os.Stdout) {
		return nil
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("close standard output: %w", err)
	}
	defer null.Close()
	if err := unix.Dup2(int(null.Fd()), int(os.Stdout.Fd())); err != nil {
		return fmt.Errorf("close standard output: %w", err)
	}
	return nil
}

// exportsLost refuses a standard output that is /dev/null: the export
// lines, which alone carry the session's token, would be written and
// lost, and no client could use the proxy, which served on for no one.
// A standard output that was closed when cordon started is /dev/null too:
// Go's runtime opens it there.
func exportsLost(w io.Writer) error {
	if w != io.Writer(os.Stdout) {
		return nil
	}
	var out, null unix.Stat_t
	if unix.Fstat(int(os.Stdout.Fd()), &out) != nil || unix.Stat(os.DevNull, &null) != nil {
		return nil
	}
	if out.Mode&unix.S_IFMT == unix.S_IFCHR && out.Rdev == null.Rdev {
		return errors.New("standard output is /dev/null (or was closed, which leaves it /dev/null), where the export lines, the only place the session's token is given, would be lost and no client could use the proxy; read them, as eval \"$(cordon proxy &)\" does")
	}
	return nil
}

// printExports writes NAME=value pairs as shell export lines, single-quoted,
// in one write, and says whether they got there.
func printExports(w io.Writer, env []string) error {
	var b strings.Builder
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", name, shellQuote(val))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote single-quotes s for POSIX shells. A string that is not
// printable UTF-8 throughout (a name from the workspace may hold escape
// sequences, which a terminal would act on, or characters that show as
// nothing, with which it would look like another: termtext.Shows) is
// written $'...' instead, each byte that is no character a terminal
// shows as \xHH, which bash, zsh and ksh read back as it was.
func shellQuote(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !termtext.Shows(r) }) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case termtext.Shows(r) && (r != utf8.RuneError || size > 1):
			b.WriteRune(r)
		default:
			for _, c := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
		i += size
	}
	b.WriteString("'")
	return b.String()
}
