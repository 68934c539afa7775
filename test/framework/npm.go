package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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
