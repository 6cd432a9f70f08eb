//go:build linux

package integration

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
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

// TestRunOutlivesItsReader: a run whose output is read by something that
// goes away (cordon run … | head -1) goes on to record its exit and do
// its aftercare. With --credential cordon writes the command's output
// itself, masked, so the command chose when cordon met the broken pipe:
// SIGPIPE killed cordon, the repository the box planted next was not set
// aside, and the host's git status ran the command it configured.
func TestRunOutlivesItsReader(t *testing.T) {
	o := testOrigin(t)
	b := newBox(t)
	cfg := filepath.Join(b.home, "config.yaml")
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443")))
	script := `echo first; sleep 1; git init -q planted && git -C planted config core.fsmonitor "touch $PWD/pwned; true"
i=0; while [ $i -lt 2000 ]; do echo more; i=$((i+1)); done`
	cmd := cordonIn(t, b.ws, b.env("PROVIDER_REAL_KEY="+realKey), "run", "--audit", b.audit, "--net", "restricted",
		"--config", cfg, "--credential", "provider", "--ephemeral-ca", resolveOrigin, "--extra-ca", o.caFile, "--", "sh", "-c", script)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = wr
	go func() { // head -1
		bufio.NewReader(rd).ReadString('\n')
		rd.Close()
	}()
	r := runResult(t, runTimeout, cmd)
	wr.Close()
	if r.code < 0 {
		t.Fatalf("cordon was killed once its reader had gone:\n%s", r.stderr)
	}
	recs := b.records()
	if _, ok := findRecord(recs, audit.Record{Type: audit.TypeExit}); !ok {
		t.Error("the run has no exit line")
	}
	if _, ok := findRecord(recs, audit.Record{Type: audit.TypeSetAside}); !ok {
		t.Error("the repository the box planted has no set_aside line")
	}
	if _, err := os.Stat(filepath.Join(b.ws, "planted", ".git")); err == nil {
		t.Error("the repository the box planted was not set aside")
	}
}

// TestRunRecordsBeforeItTells: what the aftercare did is in the log
// before cordon says it on stderr, which may be a pipe nobody reads: there
// cordon waits for ever, and the lines once waited with it.
func TestRunRecordsBeforeItTells(t *testing.T) {
	b := newBox(t)
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	// Full, and never read.
	for {
		if _, err := syscall.Write(p[1], make([]byte, 4096)); err != nil {
			break
		}
	}
	syscall.SetNonblock(p[1], false)
	wr := os.NewFile(uintptr(p[1]), "stderr")
	cmd := b.cmd("--net", "off", "--", "sh", "-c", "git init -q planted 2>/dev/null")
	cmd.Stderr = wr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	if !eventually(20*time.Second, func() bool {
		_, ok := findRecord(readAuditIfAny(b.audit), audit.Record{Type: audit.TypeSetAside})
		return ok
	}) {
		t.Error("the set_aside line waits for a stderr nobody reads")
	}
}
