package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/policy"
)

func init() { register("network", newNetworkCmd) }

func newNetworkCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:   "network off|restricted|open",
		Short: "Set the default network mode in the global config",
		Long: `Set the network key of the global config, editing that one line so the rest
of the file and its comments stay as they are (the file is created from the
cordon init template when missing):

  off         no network at all
  restricted  only the allowlist, through cordon's auditing proxy
  open        the host's network, unrestricted

A project's .cordon.yaml may choose a narrower mode; cordon run --net
changes it for one run.`,
		ValidArgs: []string{string(policy.NetOff), string(policy.NetRestricted), string(policy.NetOpen)},
		Args:      exactArgs(1, "one network mode (off, restricted or open)", "cordon network restricted"),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := policy.ParseNetMode(args[0])
			if err != nil {
				return err
			}
			path, err := globalConfigFile(config)
			if err != nil {
				return err
			}
			if err := policy.SetNetworkMode(path, mode); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "network: %s (%s)\n", mode, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "config file to edit (default $CORDON_CONFIG or ~/.config/cordon/config.yaml)")
	return cmd
}
