package main

import (
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "cordon",
		Short: "Run an agent or a command in a sandbox whose only network is an auditing egress proxy",
		Long: `cordon runs an AI coding agent, or any command, against a repository without
handing it the machine: an OS sandbox whose only way to the network is a
per-session egress proxy that allows or denies each connection, terminates TLS
to see what is really asked for, swaps masked credentials for real ones only
toward the hosts they belong to, and logs every decision.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagError)
	root.PersistentPreRun = warnReplaced
	// When args start with a command's name, that command is all that is
	// built, without the completion command it cannot reach: building
	// every command and its flags is about a millisecond of a cold start.
	// Anything else (help, completion, a name to suggest a fix for) gets
	// them all.
	if len(args) > 0 {
		if add, ok := subcommands[args[0]]; ok {
			root.CompletionOptions.DisableDefaultCmd = true
			root.AddCommand(add())
			checkFlags(root)
			oneLineErrors(root)
			return root
		}
	}
	for _, name := range slices.Sorted(maps.Keys(subcommands)) {
		root.AddCommand(subcommands[name]())
	}
	addCompletion(root)
	checkFlags(root)
	oneLineErrors(root)
	return root
}

// oneLineErrors marks the errors of the runs of cmd and the commands
// below it as runError, which main prints on one line (printError).
func oneLineErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := run(c, args); err != nil {
				return runError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		oneLineErrors(c)
	}
}

// addCompletion adds cobra's completion command, which printed its help
// and exited 0 when given a shell it has no script for (cordon
// completion tcsh), as if that were a script; it now refuses it.
func addCompletion(root *cobra.Command) {
	// cobra's scripts are written to the output the root has now; this
	// one writes to whatever it is given later (SetOut, or stdout).
	root.SetOut(laterOut{root})
	root.InitDefaultCompletionCmd()
	root.SetOut(nil)
	c, _, err := root.Find([]string{"completion"})
	if err != nil || c == root {
		return
	}
	var shells []string
	for _, s := range c.Commands() {
		shells = append(shells, s.Name())
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("no completion script for %q: use one of %s, as in: cordon completion bash", args[0], strings.Join(shells, ", "))
		}
		return cmd.Help()
	}
}

// subcommands are registered by the files that define them, one per
// command, under the name that invokes it.
var subcommands = map[string]func() *cobra.Command{"version": newVersionCmd}

// register adds a command; name must be the one its Use gives.
func register(name string, newCmd func() *cobra.Command) { subcommands[name] = newCmd }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cordon's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						v = "dev-" + s.Value[:12]
					}
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "cordon", v)
			return nil
		},
	}
}

// laterOut writes to the output root has when it is written to.
type laterOut struct{ root *cobra.Command }

func (o laterOut) Write(p []byte) (int, error) { return o.root.OutOrStdout().Write(p) }
