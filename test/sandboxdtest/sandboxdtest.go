// Package sandboxdtest runs a real sandboxd inside a test process. It is apart from
// test/framework because sandboxd's own tests use the framework.
package sandboxdtest

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/sandboxd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// Serve runs a real sandboxd in the test process on the listeners in ls (nil ones are
// not served), rooted in a temporary directory, until the test ends, and returns its root. It
// serves without authentication (--allow-unauthenticated): for tests of what sandboxd does, not
// of who may ask. ServeWithToken requires a token.
func Serve(t testing.TB, ls server.Listeners) string {
	t.Helper()
	return serve(t, ls, server.Config{AllowUnauthenticated: true})
}

// ServeWithToken is Serve with the sandbox token required on every call but health, as the
// Sandbox controller configures sandboxd.
func ServeWithToken(t testing.TB, ls server.Listeners, token string) string {
	t.Helper()
	return serve(t, ls, server.Config{Token: token})
}

// DebianPython is Debian's Python 3 with numpy, pandas and matplotlib (hack/install-deps.sh
// installs them), which the code interpreter's kernels run in tests: python3 on PATH may be
// another Python without them.
const DebianPython = "/usr/bin/python3"

// ServeInterpreter is Serve, or ServeWithToken when token is set, with the code interpreter on
// ls.Interpreter, its Python kernels run by DebianPython.
func ServeInterpreter(t testing.TB, ls server.Listeners, token string) string {
	t.Helper()
	return serve(t, ls, server.Config{AllowUnauthenticated: token == "", Token: token, InterpreterPython: DebianPython})
}

// ServeConfig is Serve with cfg's tokens, claim lock and interpreter; its root directory, its
// environment (the test's, with HOME at the root as in the image, so that bash -l reads the
// sandbox's profile and not the machine's) and its shutdown timeout are filled in.
func ServeConfig(t testing.TB, ls server.Listeners, cfg server.Config) string {
	t.Helper()
	root := t.TempDir()
	cfg.RootDir, cfg.Environ = root, process.MergeEnv(os.Environ(), map[string]string{"HOME": root})
	return start(t, ls, cfg)
}

func serve(t testing.TB, ls server.Listeners, cfg server.Config) string {
	t.Helper()
	cfg.RootDir, cfg.Environ = t.TempDir(), os.Environ()
	return start(t, ls, cfg)
}

func start(t testing.TB, ls server.Listeners, cfg server.Config) string {
	t.Helper()
	if cfg.InterpreterPython != "" {
		if _, err := os.Stat(cfg.InterpreterPython); err != nil {
			t.Fatalf("%s is missing: run hack/install-deps.sh (the code interpreter's kernels need Debian's python3 with numpy, pandas and matplotlib)", cfg.InterpreterPython)
		}
	}
	cfg.ShutdownTimeout = 5 * time.Second
	d, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("sandboxd: %v", err)
		}
	})
	return d.Root()
}

// Listen listens on the TCP address addr (port 0 picks a free one) or fails the test.
func Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	return l
}

// LockPort holds an exclusive lock on the file path until the test ends, so that tests of
// other processes on this machine that serve the same fixed port (the SDKs' debug ports) wait
// for this one.
func LockPort(t testing.TB, path string, port int) {
	t.Helper()
	lock, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("waiting for %s (port %d is machine-wide)", path, port)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // closing the file releases the lock
}
