package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError explains a flag value that the flag's own parser refused:
// pflag's message is that parser's error (strconv.ParseInt: parsing
// "x": invalid syntax), which says neither what the flag takes nor how
// to write it.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	f := iv.GetFlag()
	return fmt.Errorf("--%s %q: %s", f.Name, iv.GetValue(), valueHint(cmd, f, iv.Unwrap()))
}

// valueHint says what the flag f takes, by its type, where its parser's
// error (cause) does not.
func valueHint(cmd *cobra.Command, f *pflag.Flag, cause error) string {
	if errors.Is(cause, errEmptyValue) {
		return fmt.Sprintf("an empty value; give one (see %s --help), or leave the flag out", cmd.CommandPath())
	}
	switch f.Value.Type() {
	case "bool":
		return fmt.Sprintf("not true or false; give --%s alone for true, or write --%s=false", f.Name, f.Name)
	case "duration":
		return "not a duration; write a number with its unit, such as 90s, 10m or 2h"
	case "int":
		return "not a whole number; write one such as 256"
	}
	return cause.Error()
}
