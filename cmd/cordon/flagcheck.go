package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkedValue is a single-valued flag that refuses an empty string,
// which the commands would otherwise take for the flag left out (--net
// "$MODE" with MODE unset ran with the configured network, --config ""
// read the default config, --audit "" logged to the default log), and
// keeps the values a later one replaced, which warnReplaced tells.
type checkedValue struct {
	pflag.Value
	given    bool
	last     string
	replaced []string
}

var errEmptyValue = errors.New("an empty value")

func (v *checkedValue) Set(s string) error {
	if s == "" && v.Type() == "string" {
		return errEmptyValue
	}
	if v.given && s != v.last {
		v.replaced = append(v.replaced, v.last)
	}
	v.given, v.last = true, s
	return v.Value.Set(s)
}

// checkFlags puts every single-valued flag of cmd and the commands below
// it behind a checkedValue; a repeatable one (--allow) takes each value.
func checkFlags(cmd *cobra.Command) {
	check := func(f *pflag.Flag) {
		switch f.Value.(type) {
		case *checkedValue, pflag.SliceValue:
		default:
			f.Value = &checkedValue{Value: f.Value}
		}
	}
	cmd.Flags().VisitAll(check)
	cmd.PersistentFlags().VisitAll(check)
	for _, c := range cmd.Commands() {
		checkFlags(c)
	}
}

// warnReplaced says which single-valued flags were given again with
// another value: the last one is used (a wrapper's default may be
// overridden so), but --net off --net open went on with the host's
// network without a word.
func warnReplaced(cmd *cobra.Command, _ []string) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if v, ok := f.Value.(*checkedValue); ok && len(v.replaced) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "cordon: warning: --%s is given %d times (%s); the last, %q, is used\n", f.Name, len(v.replaced)+1, quoteAll(append(v.replaced, v.last)), v.last)
		}
	})
}

// quoteAll lists values quoted, separated by commas.
func quoteAll(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
