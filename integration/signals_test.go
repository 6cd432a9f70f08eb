//go:build linux

package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/syncbuf"
)

// TestRunRelaysSignals: signals cordon receives reach the command (pid 2
// under bwrap's init), which can handle them and choose its exit; other
// processes in the sandbox are not signalled.
func TestRunRelaysSignals(t *testing.T) {
	for _, tt := range []struct {
		name, net string
		sig       syscall.Signal
	}{
		{"USR1", "off", syscall.SIGUSR1},
		{"INT", "off", syscall.SIGINT},
		{"TERM", "off", syscall.SIGTERM},
		// Under the holder's namespaces too.
		{"USR1", "restricted", syscall.SIGUSR1},
	} {
		t.Run(tt.name+"-"+tt.net, func(t *testing.T) {
			b := newBox(t)
			marker := uniqueSleep()
			script := "sleep " + marker + " & trap 'echo got-" + tt.name + "; kill -0 $! && echo bg-alive; kill $!; exit 7' " + tt.name +
				"; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 9"
			cmd := b.cmd("--net", tt.net, "--", "sh", "-c", script)
			var out syncbuf.Buffer
			cmd.Stdout = &out
			stdout := out.String
			done := make(chan result, 1)
			go func() { done <- runResult(t, runTimeout, cmd) }()
			if !eventually(30*time.Second, func() bool { return strings.Contains(stdout(), "ready") }) {
				t.Fatalf("the command did not start; stdout %q", stdout())
			}
			// The background sleep (which may exec a moment after "ready")
			// must be running: the handler checks only the command was told.
			if !eventually(10*time.Second, func() bool { return len(procsRunning("sleep", marker)) == 1 }) {
				t.Fatalf("%d background sleeps before the signal, want 1", len(procsRunning("sleep", marker)))
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			r := <-done
			expectCode(t, r, 7)
			if got := stdout(); !strings.Contains(got, "got-"+tt.name+"\nbg-alive\n") {
				t.Fatalf("the command's handler did not run, or the signal reached its background child too: %q", got)
			}
		})
	}
}
