//go:build linux

package main

import (
	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/sandbox/linux"
)

func init() { register(linux.ProbeCommand, newProbeCmd) }

// newProbeCmd is the hidden self-test cordon runs inside a probe sandbox.
func newProbeCmd() *cobra.Command {
	return &cobra.Command{
		Use:                linux.ProbeCommand,
		Short:              "Check a sandbox from inside (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := linux.Probe(args); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
