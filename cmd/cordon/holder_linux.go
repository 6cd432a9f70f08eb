//go:build linux

package main

import (
	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
)

func init() { register("__holder", newHolderCmd) }

// newHolderCmd is the hidden command that sets up a restricted run's
// network namespace (addresses, nftables, the proxy's and resolver's
// sockets) and then, once cordon sends the launch, execs bwrap in it.
func newHolderCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "__holder",
		Short:              "Hold a restricted run's network namespace (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			if code := holder.Run(); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
