// Package sandboxdtest runs a real sandboxd inside a test process. It is apart from
// test/framework because sandboxd's own tests use the framework.
package sandboxdtest

import (
	"context"
	"os"
	"testing"
	"time"

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
	if _, err := os.Stat(DebianPython); err != nil {
		t.Fatalf("%s is missing: run hack/install-deps.sh (the code interpreter's kernels need Debian's python3 with numpy, pandas and matplotlib)", DebianPython)
	}
	return serve(t, ls, server.Config{AllowUnauthenticated: token == "", Token: token, InterpreterPython: DebianPython})
}

func serve(t testing.TB, ls server.Listeners, cfg server.Config) string {
	t.Helper()
	cfg.RootDir, cfg.Environ, cfg.ShutdownTimeout = t.TempDir(), os.Environ(), 5*time.Second
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
