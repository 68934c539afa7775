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
// not served), rooted in a temporary directory, until the test ends, and returns its root.
func Serve(t testing.TB, ls server.Listeners) string {
	t.Helper()
	// Its clients send no sandbox token yet, so it serves unauthenticated: the explicit opt-in.
	d, err := server.New(server.Config{RootDir: t.TempDir(), AllowUnauthenticated: true, Environ: os.Environ(), ShutdownTimeout: 5 * time.Second})
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
