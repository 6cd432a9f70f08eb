package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/policy"
)

func init() { register("init", newConfigInitCmd) }

func newConfigInitCmd() *cobra.Command {
	var (
		config string
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented global config with the default posture",
		Long: `Write the global config (~/.config/cordon/config.yaml, or $XDG_CONFIG_HOME,
$CORDON_CONFIG or --config) with the defaults: network restricted, an empty
allowlist, and every other key shown commented out with an example. The file
is mode 0600 in a 0700 directory. An existing file is kept unless --force.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := globalConfigFile(config)
			if err != nil {
				return err
			}
			if err := policy.WriteInitConfig(path, force); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "config file to write (default $CORDON_CONFIG or ~/.config/cordon/config.yaml)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing config with the template")
	return cmd
}

// globalConfigFile is the --config value, or the global config location.
func globalConfigFile(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return policy.GlobalConfigPath()
}
