package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/paddock-dev/paddock/test/framework"
)

// testCLIStdin: `exec -i` feeds stdin to the command in the sandbox, and `exec -it` gives a
// shell on a terminal, here a pseudo-terminal the test holds as a user's terminal would be.
func testCLIStdin(t *testing.T, cli *cliEnv) {
	cli.stdin = strings.NewReader("line one\nline two\n")
	if r := cli.must("exec", "-i", "agent", "--", "wc", "-l"); strings.TrimSpace(r.stdout) != "2" {
		t.Errorf("exec -i wc -l printed %q, want 2", r.stdout)
	}
	cli.stdin = strings.NewReader("x\n")
	if r := cli.run("exec", "-i", "agent", "--", "sh", "-c", "read v; echo got $v; exit 3"); r.code != 3 || r.stdout != "got x\n" {
		t.Errorf("exec -i: code %d, stdout %q; want 3 and the line read", r.code, r.stdout)
	}

	cmd := exec.Command(cli.bin, "--kubeconfig", suite.kubeconfig, "-n", cli.ns, "exec", "-it", "agent", "--", "sh")
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 91, Rows: 27})
	if err != nil {
		t.Fatalf("starting paddock exec -it on a pseudo-terminal: %v", err)
	}
	defer term.Close()
	var mu sync.Mutex
	var screen strings.Builder
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := term.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	seen := func(want ...string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				if !strings.Contains(screen.String(), w) {
					return fmt.Errorf("terminal shows %q, waiting for %q", screen.String(), w)
				}
			}
			return nil
		}
	}
	// The shell sees the terminal's size, and its output comes back as typed.
	if _, err := io.WriteString(term, "stty size; echo marker-$((6*7))\r"); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, time.Minute, seen("27 91", "marker-42"))
	if _, err := io.WriteString(term, "exit 4\r"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("paddock exec -it did not end after exit 4; terminal:\n%s", screen.String())
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 4 {
		t.Errorf("paddock exec -it ended with %v, want exit status 4", err)
	}
}
