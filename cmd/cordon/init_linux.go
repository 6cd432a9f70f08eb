//go:build linux

package main

import (
	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/sandbox/linux"
)

func init() { subcommands = append(subcommands, newInitCmd) }

// newInitCmd is the hidden command cordon runs as pid 1 inside the sandbox.
func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:                linux.InitCommand,
		Short:              "Run as the sandbox's init (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := linux.Init(args); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}
