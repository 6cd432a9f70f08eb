package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Checks of positional arguments whose errors say what a command takes,
// with an example, where cobra's own only count them.

// noArgs refuses any positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("%s takes no arguments, got %q; see %s --help", sub(cmd), args[0], cmd.CommandPath())
}

// exactArgs wants n positional arguments, what they are, as in example.
func exactArgs(n int, what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		return fmt.Errorf("%s takes %s, got %d argument(s); for example: %s", sub(cmd), what, len(args), example)
	}
}

// commandArgs wants a command to run, named (an empty name, as "$CMD"
// gives with CMD unset, was refused only once the box was being built).
func commandArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return fmt.Errorf("no command to run: put it after --, as in: %s --net off -- make test", cmd.CommandPath())
	case args[0] == "":
		return fmt.Errorf("the command to run is an empty name (\"\"): name a program after --, as in: %s --net off -- make test", cmd.CommandPath())
	}
	return nil
}

// dashTaken names the flag that took for its value the -- meant to
// start the command (cordon run --net -- make test): a flag takes the
// next word whatever it is, so the command then seemed not to follow
// --, and the error said to put it there.
func dashTaken(cmd *cobra.Command) (name string) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		values := []string{f.Value.String()}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			values = s.GetSlice()
		}
		if slices.Contains(values, "--") {
			name = f.Name
		}
	})
	return name
}

// sub is cmd's path below cordon itself, whose name every error already
// starts with.
func sub(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}
