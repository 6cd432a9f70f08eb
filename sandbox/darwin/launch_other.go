//go:build !unix

package darwin

import (
	"context"
	"errors"

	"github.com/cordon-sandbox/cordon/sandbox"
)

// errNotUnix is why nothing runs here: sandbox-exec is a Unix program.
var errNotUnix = errors.New("seatbelt: sandbox-exec runs only on macOS")

func runProbe(context.Context, string, string) (string, error) { return "", errNotUnix }

func launch(context.Context, *sandbox.Spec, *sandbox.Plan) (sandbox.Result, error) {
	return sandbox.Result{ExitCode: exitLaunch}, errNotUnix
}
