//go:build linux

// Command cordon-holder is the first process of a restricted cordon run's
// network namespace (see package holder). cordon starts it from beside its
// own binary; without it, cordon runs itself as the holder
// (`cordon __holder`), which starts more slowly. Nothing else should run
// it.
package main

import (
	"os"

	_ "github.com/cordon-sandbox/cordon/internal/prefault" // start-up's page faults, taken in bulk
	"github.com/cordon-sandbox/cordon/sandbox/linux/holder"
)

func main() { os.Exit(holder.Run()) }
