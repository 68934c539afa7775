package framework

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var npmInstalled sync.Map // directory → *sync.Once

// NodePackage returns the absolute path of the Node package in dir (a test's client/ with its
// package-lock.json), installed with `npm ci` once per process unless node_modules is already
// installed (the Makefile's *-deps targets do it ahead of time).
func NodePackage(t testing.TB, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: this test runs a real JavaScript client with Node.js (make e2e-deps installs it)")
	}
	once, _ := npmInstalled.LoadOrStore(abs, new(sync.Once))
	var failure string
	once.(*sync.Once).Do(func() {
		if _, err := os.Stat(filepath.Join(abs, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = abs
		if out, err := cmd.CombinedOutput(); err != nil {
			failure = "npm ci in " + abs + ": " + err.Error() + "\n" + string(out)
		}
	})
	if failure != "" {
		t.Fatal(failure)
	}
	return abs
}

// NodeScriptTimeout bounds one RunNode.
const NodeScriptTimeout = 5 * time.Minute

// RunNode runs `node script` in the Node package dir (see NodePackage) with env added to the
// test's environment, for at most NodeScriptTimeout, and returns what it printed.
func RunNode(t testing.TB, dir, script string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), NodeScriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = NodePackage(t, dir)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RequireChecks logs a check script's output line by line and fails the test unless the script
// exited 0 and printed summary ("" for no summary).
func RequireChecks(t testing.TB, out string, err error, summary string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Log(line)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("the script failed its checks (exit %d); see the FAIL line above", exit.ExitCode())
		}
		t.Fatal(err)
	}
	if summary != "" && !strings.Contains(out, summary) {
		t.Fatalf("the script ended without %q", summary)
	}
}
