package main

import (
	"errors"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkedValue is a single-valued flag that refuses an empty string,
// which the commands would otherwise take for the flag left out: --net
// "$MODE" with MODE unset ran with the configured network, --config ""
// read the default config, --audit "" logged to the default log.
type checkedValue struct {
	pflag.Value
}

var errEmptyValue = errors.New("an empty value")

func (v *checkedValue) Set(s string) error {
	if s == "" {
		return errEmptyValue
	}
	return v.Value.Set(s)
}

// checkFlags puts every string flag of cmd and the commands below it
// behind a checkedValue.
func checkFlags(cmd *cobra.Command) {
	check := func(f *pflag.Flag) {
		if _, done := f.Value.(*checkedValue); !done && f.Value.Type() == "string" {
			f.Value = &checkedValue{f.Value}
		}
	}
	cmd.Flags().VisitAll(check)
	cmd.PersistentFlags().VisitAll(check)
	for _, c := range cmd.Commands() {
		checkFlags(c)
	}
}
