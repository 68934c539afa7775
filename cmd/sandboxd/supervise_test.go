package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/test/framework"
)

// serviceScript is a container's own command under an injected sandboxd: it records its uid and
// pid, traps HUP and TERM, tries every way to read sandboxd's tokens (sandboxd is its parent),
// creates done-N once run N's attempts are all written, then serves until stopped. Its one
// argument is the directory it writes to. The attempts' output is no place for a completion
// marker: env prints the test's environment (DEBIAN_FRONTEND holds "END"), and grep prints
// whatever /tmp holds.
func serviceScript() string {
	var b strings.Builder
	b.WriteString(`out=$1
id -u > "$out/uid"
echo $$ >> "$out/pids"
trap 'echo hup >> "$out/signals"' HUP
trap 'echo term >> "$out/signals"; exit 0' TERM
run=$(wc -l < "$out/pids" | tr -d ' ')
{
`)
	for i, a := range tokenAttempts("$PPID") {
		fmt.Fprintf(&b, "( %s )\necho '--- attempt %d'\n", a.script, i)
	}
	b.WriteString(`} > "$out/attempts-$run" 2>&1
: > "$out/done-$run"
while :; do sleep 0.05; done
`)
	return b.String()
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

// waitFile polls path until check accepts its content.
func waitFile(t *testing.T, path string, check func(content string) bool) string {
	t.Helper()
	var content string
	framework.Eventually(t, func(context.Context) error {
		b, _ := os.ReadFile(path)
		if content = string(b); !check(content) {
			return fmt.Errorf("%s holds %q", filepath.Base(path), content)
		}
		return nil
	})
	return content
}

// waitRun waits until run n of serviceScript made all its attempts. Before that the test would
// check part of what they got, and a signal would wait for the attempt in progress (the shell runs
// a trap between commands), which can outlast sandboxd's --shutdown-timeout: the service is then
// killed without running its TERM trap.
func waitRun(t *testing.T, out string, n int) {
	t.Helper()
	framework.Eventually(t, func(context.Context) error {
		if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("done-%d", n))); err != nil {
			return fmt.Errorf("run %d of the service has not made all its attempts: %w", n, err)
		}
		return nil
	})
}

// TestSupervisedService runs sandboxd as the sandbox's user with its tokens, as injected into an
// image, with a service command: the service runs as that user without being able to read the
// tokens, receives the signals sandboxd gets, is started again when it dies, and is stopped
// with sandboxd at SIGTERM.
func TestSupervisedService(t *testing.T) {
	requireRoot(t)
	scripts, out := sandboxUserDir(t), sandboxUserDir(t)
	script := filepath.Join(scripts, "service.sh")
	if err := os.WriteFile(script, []byte(serviceScript()), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startAsSandboxUser(t, "--legacy-port=0", "--service-restart-backoff=10ms", "--", "/bin/sh", script, out)
	sandboxdPID := d.cmd.Process.Pid

	// First run: its uid, and what its attempts on the tokens got.
	waitRun(t, out, 1)
	if uid := readLines(filepath.Join(out, "uid")); len(uid) != 1 || uid[0] != strconv.Itoa(sandboxUID) {
		t.Errorf("the service runs as uid %q, want %d", uid, sandboxUID)
	}
	attempts, _ := os.ReadFile(filepath.Join(out, "attempts-1"))
	for _, marker := range []string{d.token, d.control, "-OPENED", "-LISTED", "MAPS-READ", "\n" + sandboxd.SecretEnvPrefix} {
		if bytes.Contains(attempts, []byte(marker)) {
			t.Errorf("the service read %q from sandboxd (pid %d):\n%s", marker, sandboxdPID, attempts)
		}
	}
	t.Logf("the service's attempts on the tokens (%d bytes of output) found neither token", len(attempts))

	// Signals sandboxd receives reach the service.
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(out, "signals"), func(c string) bool { return c == "hup\n" })

	// A service that dies is started again.
	first := readLines(filepath.Join(out, "pids"))[0]
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRun(t, out, 2)
	if pids := readLines(filepath.Join(out, "pids")); len(pids) != 2 || pids[1] == first {
		t.Errorf("pids of the runs %q, want a second run with a new pid", pids)
	}

	// SIGTERM stops the service, then sandboxd, which exits cleanly.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("sandboxd exited with %v after SIGTERM, want success", err)
		}
	case <-time.After(framework.DefaultTimeout):
		t.Fatal("sandboxd did not exit after SIGTERM")
	}
	if got := readLines(filepath.Join(out, "signals")); strings.Join(got, " ") != "hup term" {
		t.Errorf("signals the service saw %q, want hup then term", got)
	}
}

// The service never outlives sandboxd, even one killed outright.
func TestServiceDiesWithSandboxd(t *testing.T) {
	requireRoot(t)
	out := sandboxUserDir(t)
	d := startAsSandboxUser(t, "--legacy-port=0", "--", "/bin/sh", "-c", `echo $$ > "$0/pid"; exec sleep 600`, out)
	pid := strings.TrimSpace(waitFile(t, filepath.Join(out, "pid"), func(c string) bool { return strings.HasSuffix(c, "\n") }))
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !bytes.Contains(b, []byte(") Z ")) {
			return fmt.Errorf("the service (pid %s) still runs after sandboxd was killed", pid)
		}
		return nil
	})
}

// --preflight refuses root and says so in the termination message, with its exit code.
func TestPreflightWritesTheTerminationMessage(t *testing.T) {
	requireRoot(t) // the check that fails here is the one that refuses root
	dir := t.TempDir()
	msgPath := filepath.Join(dir, "termination-log")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "--preflight", "--termination-message-path="+msgPath, "--root-dir="+filepath.Join(dir, "root"),
		"--listen-host=127.0.0.1", "--", "no-such-service-command")
	cmd.Env = append(childEnviron(os.Environ()), runMainEnv+"=1", sandboxd.TokenEnv+"=t")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sandboxd.PreflightExitCode {
		t.Fatalf("sandboxd --preflight as root: %v, want exit code %d\n%s", err, sandboxd.PreflightExitCode, out)
	}
	msg, err := os.ReadFile(msgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{sandboxd.PreflightMessagePrefix, "runs as root", "runAsUser", `"no-such-service-command"`} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("termination message %q does not contain %q", msg, want)
		}
	}
}

// --install-to copies sandboxd, read-only, and exits.
func TestInstallTo(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "sandboxd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "--install-to="+dst)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sandboxd --install-to: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("installed copy differs from the binary (%d bytes, want %d; %v)", len(got), len(want), err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o555 {
		t.Errorf("installed mode %v, want r-xr-xr-x", fi.Mode())
	}
}
