package devcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcessStartPidStop(t *testing.T) {
	cfg := Defaults(t.TempDir())
	p := cfg.process("sleeper")
	if p.pid() != 0 {
		t.Fatal("pid() of a never-started process is not 0")
	}
	pid, err := p.start("/bin/sh", []string{"-c", "echo hello-from-sleeper; exec sleep 60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.pid(); got != pid {
		t.Fatalf("pid() = %d, want %d", got, pid)
	}
	if err := p.stop(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if p.pid() != 0 {
		t.Fatal("process still alive after stop")
	}
	if _, err := os.Stat(p.pidFile); !os.IsNotExist(err) {
		t.Fatalf("pid file left behind: %v", err)
	}
	if !strings.Contains(p.tail(5), "hello-from-sleeper") {
		t.Fatalf("log tail lacks the output:\n%s", p.tail(5))
	}
}

func TestProcessRecycledPidIsNotOurs(t *testing.T) {
	cfg := Defaults(t.TempDir())
	p := cfg.process("ghost")
	if err := os.MkdirAll(filepath.Dir(p.pidFile), 0o755); err != nil {
		t.Fatal(err)
	}
	// Our own pid with a start time that is not ours: a recycled pid.
	if err := os.WriteFile(p.pidFile, []byte(strings.Join([]string{itoa(os.Getpid()), "1"}, " ")), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := p.pid(); got != 0 {
		t.Fatalf("pid() = %d for a recycled pid, want 0", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestEnsureReportsADeadComponentWithItsLog(t *testing.T) {
	cl := &cluster{cfg: Defaults(t.TempDir())}
	comp := component{
		name:    "crasher",
		binary:  "/bin/sh",
		args:    []string{"-c", "echo config is broken: line 3 >&2; exit 3"},
		ready:   func(context.Context) error { return errors.New("not serving") },
		timeout: 30 * time.Second,
	}
	_, _, err := cl.ensure(t.Context(), comp)
	if err == nil {
		t.Fatal("ensure of a crashing component succeeded")
	}
	for _, want := range []string{"crasher exited", "config is broken: line 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
