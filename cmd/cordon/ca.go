package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/certs"
)

func init() { register("ca", newCACmd) }

func newCACmd() *cobra.Command {
	var dir string
	caDir := func() (string, error) {
		if dir != "" {
			return filepath.Abs(dir)
		}
		return certs.DefaultDir()
	}
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Show, export or rotate the certificate authority cordon signs intercepted TLS with",
		Long: `cordon terminates TLS with certificates signed by its own CA, made on first
use in $XDG_CONFIG_HOME/cordon/ca (default ~/.config/cordon/ca): an ECDSA P-256
key readable only by you and a certificate valid for one year. Sandboxed clients
are pointed at it automatically; trust it elsewhere only if you want to.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown subcommand %q for `cordon ca`: use path, export or rotate", args[0])
			}
			return cmd.Help()
		},
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "CA directory (default $XDG_CONFIG_HOME/cordon/ca, else ~/.config/cordon/ca)")

	cmd.AddCommand(&cobra.Command{
		Use:   "path",
		Short: "Print the path of the CA certificate, creating the CA on first use",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := caDir()
			if err != nil {
				return err
			}
			if _, err := certs.LoadOrCreate(d); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), certs.CertPath(d))
			return nil
		},
	}, &cobra.Command{
		Use:   "export",
		Short: "Print the CA certificate (PEM), creating the CA on first use",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := caDir()
			if err != nil {
				return err
			}
			ca, err := certs.LoadOrCreate(d)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(ca.CertPEM())
			return err
		},
	}, &cobra.Command{
		Use:   "rotate",
		Short: "Replace the CA with a new key and certificate, and print the certificate's path",
		Long: `rotate replaces the CA with a new key and certificate. Certificates signed by
the old CA stop verifying against the new one: give the new certificate to
anything you had made trust the old one. Running cordon sessions go on with
the CA they began with (their trust bundles hold it) until they end; restart
one whose clients trust the CA's own file rather than the session's bundle.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := caDir()
			if err != nil {
				return err
			}
			if _, err := certs.Rotate(d); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), certs.CertPath(d))
			fmt.Fprintln(cmd.ErrOrStderr(), "cordon: new CA made; running sessions go on with the old one until they end, the next ones use this one; give it to whatever you made trust the old one (an imported copy)")
			return nil
		},
	})
	return cmd
}
