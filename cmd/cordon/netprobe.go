package main

import (
	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/session"
)

func init() { register(session.NetProbeCommand, newNetProbeCmd) }

// newNetProbeCmd is the hidden command doctor's restricted-network probe
// runs inside its box.
func newNetProbeCmd() *cobra.Command {
	return &cobra.Command{
		Use:                session.NetProbeCommand + " NAME PORT DENIED",
		Short:              "Probe the restricted network from inside a box (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := session.NetProbe(args); err != nil {
				return exitError{code: 1, msg: "netprobe: " + err.Error()}
			}
			return nil
		},
	}
}
