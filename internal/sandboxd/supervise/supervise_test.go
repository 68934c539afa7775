package supervise

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/test/framework"
)

// service starts a /bin/sh script as a service that logs to a file, and stops it at cleanup.
func service(t *testing.T, policy Policy, script string) (*Service, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	s, err := Start(Config{Argv: []string{"/bin/sh", "-c", script, "svc", log}, Env: []string{"PATH=/usr/bin:/bin"},
		Restart: policy, Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Stop(ctx, syscall.SIGKILL)
	})
	return s, log
}

func lines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

// waitLines polls the service's log until it holds at least n lines, and returns them.
func waitLines(t *testing.T, log string, n int) []string {
	t.Helper()
	var got []string
	framework.Eventually(t, func(context.Context) error {
		if got = lines(log); len(got) < n {
			return fmt.Errorf("log %q has %d lines, want at least %d", got, len(got), n)
		}
		return nil
	})
	return got
}

func waitDone(t *testing.T, s *Service) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(framework.DefaultTimeout):
		t.Fatal("the supervisor never gave up the service")
	}
}

// A service that dies is started again, as a new process each time.
func TestRestartsAServiceThatDies(t *testing.T) {
	_, log := service(t, Always, `echo $$ >> "$1"; exit 3`)
	pids := waitLines(t, log, 3)
	if pids[0] == pids[1] || pids[1] == pids[2] {
		t.Errorf("runs share a pid: %v", pids)
	}
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		exit   int
		done   bool // the supervisor gives up after the first run
	}{
		{"always restarts a clean exit", Always, 0, false},
		{"on-failure restarts a failure", OnFailure, 1, false},
		{"on-failure leaves a clean exit", OnFailure, 0, true},
		{"never leaves a failure", Never, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := service(t, tt.policy, fmt.Sprintf(`echo run >> "$1"; exit %d`, tt.exit))
			if !tt.done {
				waitLines(t, log, 2)
				return
			}
			waitDone(t, s)
			st, _ := s.Status()
			if got := lines(log); len(got) != 1 || st.Starts != 1 || st.Running || st.LastExit != fmt.Sprintf("exit status %d", tt.exit) {
				t.Errorf("after giving up: log %q, status %+v; want one run ended with exit status %d", got, st, tt.exit)
			}
		})
	}
}

// Forwarded signals reach the running service; Stop sends its signal, waits for the exit and
// starts nothing after.
func TestSignalsAndStop(t *testing.T) {
	// sandboxd handles SIGHUP (it forwards it to the service, cmd/sandboxd), so the Go runtime
	// has a handler for it and its services start with SIGHUP at its default. A test binary
	// started with SIGHUP ignored (under nohup, as some runners start it) would hand the service
	// an ignored SIGHUP, which a non-interactive shell cannot trap; handle it here as sandboxd does.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	s, log := service(t, Always, `trap 'echo hup >> "$1"' HUP; trap 'echo term >> "$1"; exit 0' TERM; echo up >> "$1"; while :; do sleep 0.05; done`)
	waitLines(t, log, 1)
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLines(t, log, 2)
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultTimeout)
	defer cancel()
	s.Stop(ctx, syscall.SIGTERM)
	waitDone(t, s)
	st, _ := s.Status()
	got := lines(log)
	if len(got) < 3 || got[0] != "up" || got[len(got)-1] != "term" || slices.ContainsFunc(got[1:len(got)-1], func(l string) bool { return l != "hup" }) || st.Starts != 1 || st.Running {
		t.Errorf("log %q, status %+v; want one run that saw up, hup (once or more), term", got, st)
	}
}

// A service that ignores SIGTERM is killed, with what it started, when Stop's context ends.
func TestStopKillsAServiceThatIgnoresTheSignal(t *testing.T) {
	s, log := service(t, Always, `trap '' TERM; sleep 600 & echo $! >> "$1"; wait`)
	child := waitLines(t, log, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.Stop(ctx, syscall.SIGTERM)
	waitDone(t, s)
	framework.Eventually(t, func(context.Context) error {
		if _, err := os.Stat("/proc/" + child); err == nil {
			return fmt.Errorf("the service's child %s still runs", child)
		}
		return nil
	})
}

func TestStartRefusesNoCommand(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start with no command succeeded")
	}
	if _, err := ParsePolicy("sometimes"); err == nil || !strings.Contains(err.Error(), "always, on-failure, never") {
		t.Errorf("ParsePolicy(sometimes) = %v, want the accepted values named", err)
	}
}
