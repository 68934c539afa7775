// Package interpreter runs the unmodified @e2b/code-interpreter SDK (client/package.json, pinned by
// its lockfile) against an in-process sandboxd serving the code interpreter, through the SDK's
// debug mode: the SDK then calls http://localhost:49999 with no control plane. That port is
// fixed, so every test that serves it holds a machine-wide file lock.
package interpreter

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
)

// portLock serializes every process on this machine that serves the interpreter's debug port.
const portLock = "/tmp/paddock-e2b-interpreter-port.lock"

// debianPython has numpy, pandas and matplotlib (hack/install-deps.sh).
const debianPython = "/usr/bin/python3"

const (
	sandboxToken = "sandbox-token-for-interpreter-tests"
	controlToken = "control-token-for-interpreter-tests"
	claimValue   = "set-by-the-claim"
)

// daemon is a sandboxd serving the interpreter on the debug port, started locked like a warm
// member.
type daemon struct {
	root, rest string
}

func startDaemon(t testing.TB) daemon {
	t.Helper()
	if _, err := os.Stat(debianPython); err != nil {
		t.Fatalf("%s is missing: run hack/install-deps.sh", debianPython)
	}
	lock, err := os.OpenFile(portLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("waiting for %s (the interpreter's port %d is machine-wide)", portLock, sandboxd.InterpreterPort)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // closing the file releases the lock

	rootDir := t.TempDir()
	d, err := server.New(server.Config{
		RootDir:           rootDir,
		Token:             sandboxToken,
		ControlToken:      controlToken,
		RequireClaim:      true,
		Environ:           process.MergeEnv(os.Environ(), map[string]string{"HOME": rootDir}),
		ShutdownTimeout:   5 * time.Second,
		InterpreterPython: debianPython,
	})
	if err != nil {
		t.Fatal(err)
	}
	listen := func(addr string) net.Listener {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		return l
	}
	ls := server.Listeners{
		REST:        listen("127.0.0.1:0"),
		Interpreter: listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(sandboxd.InterpreterPort))),
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return daemon{root: d.Root(), rest: "http://" + ls.REST.Addr().String()}
}

// claimIt applies claim settings with a variable, as the claim controller does.
func (d daemon) claimIt(t testing.TB) {
	t.Helper()
	framework.BindSandboxd(t, d.rest, controlToken, claim.Settings{ClaimName: "ci", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "CLAIM_VAR", Value: claimValue}}})
}

// runSDK runs client/ci.mjs in mode and returns its output.
func runSDK(t testing.TB, d daemon, mode string) (string, error) {
	dir := framework.NodePackage(t, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "ci.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "E2B_DEBUG=true", "MODE="+mode, "TOKEN="+sandboxToken, "ROOT_DIR="+d.root, "CLAIM_VALUE="+claimValue)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func requireChecks(t *testing.T, out string, err error, summary string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Log(line)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("the SDK failed checks (exit %d); see FAIL lines above", exit.ExitCode())
		}
		t.Fatal(err)
	}
	if summary != "" && !strings.Contains(out, summary) {
		t.Fatalf("ci.mjs ended without %q", summary)
	}
}

// TestCodeInterpreterSDK runs every check of client/ci.mjs: first against the locked warm
// member, then, once claimed, results, state, streaming, errors, display, charts, DataFrames,
// contexts, languages, env vars, timeouts and a wrong token.
func TestCodeInterpreterSDK(t *testing.T) {
	d := startDaemon(t)
	out, err := runSDK(t, d, "locked")
	requireChecks(t, out, err, "ok an unclaimed warm member refuses the sandbox token")
	d.claimIt(t)
	out, err = runSDK(t, d, "")
	requireChecks(t, out, err, "all checks passed")
}

// BenchmarkCodeInterpreterSDK prints the SDK's runCode('1+1') p50 and p99 against the in-process
// daemon. Run: go test ./test/integration/interpreter/ -run '^$' -bench SDK -benchtime 1x
func BenchmarkCodeInterpreterSDK(b *testing.B) {
	d := startDaemon(b)
	d.claimIt(b)
	for range b.N {
		out, err := runSDK(b, d, "bench")
		b.Log("\n" + out)
		if err != nil {
			b.Fatal(err)
		}
	}
}
