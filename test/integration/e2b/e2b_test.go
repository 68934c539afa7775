// Package e2b runs the unmodified E2B JavaScript SDK, both pinned versions (client/package.json),
// against an in-process sandboxd through the SDK's debug mode: the SDK then talks straight to
// http://localhost:49983 with no control plane. That port is fixed, so every test that serves
// it holds a machine-wide file lock.
package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// debugPortLock serializes every process on this machine that serves the E2B debug port.
const debugPortLock = "/tmp/paddock-e2b-debug-port.lock"

// sdkVersions are the npm aliases of the pinned SDK versions in client/package.json.
var sdkVersions = []string{"e2b-2.51.0", "e2b-2.50.0"}

const (
	sandboxToken = "sandbox-token-for-e2b-tests"
	claimToken   = "claim-token-for-e2b-tests"
	claimValue   = "set-by-the-claim"
)

type daemon struct {
	root   string
	legacy string
}

// startDaemon locks the debug port and serves a sandboxd with a token and claim settings on it
// until the test ends.
func startDaemon(t testing.TB) daemon {
	t.Helper()
	lock, err := os.OpenFile(debugPortLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("waiting for %s (the E2B debug port %d is machine-wide)", debugPortLock, sandboxd.EnvdPort)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // closing the file releases the lock

	// HOME is the sandbox root, as in the image (/home/user): bash -l reads its profile, not the
	// test machine's.
	rootDir := t.TempDir()
	d, err := server.New(server.Config{
		RootDir:         rootDir,
		Token:           sandboxToken,
		ControlToken:    claimToken,
		Environ:         process.MergeEnv(os.Environ(), map[string]string{"HOME": rootDir}),
		ShutdownTimeout: 5 * time.Second,
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
		REST:   listen("127.0.0.1:0"),
		Legacy: listen("127.0.0.1:0"),
		Envd:   listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(sandboxd.EnvdPort))),
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
	rest := "http://" + ls.REST.Addr().String()
	body, _ := json.Marshal(claim.Settings{ClaimName: "e2b", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "CLAIM_VAR", Value: claimValue}}})
	req, _ := http.NewRequest(http.MethodPut, rest+"/v1/claim-settings", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+claimToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("claim settings: %s", resp.Status)
	}
	return daemon{root: d.Root(), legacy: "http://" + ls.Legacy.Addr().String()}
}

var installOnce sync.Once

// clientDir is the Node package of the SDK driver, installed with `npm ci` when `make e2b-deps`
// has not installed it yet.
func clientDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: the E2B tier runs the real JavaScript SDK with Node.js >= 20.18.1")
	}
	installOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// runSDK runs client/compat.mjs with one SDK version and returns its output.
func runSDK(t testing.TB, d daemon, pkg string, extraEnv ...string) (string, error) {
	dir := clientDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "compat.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"E2B_DEBUG=true",
		"E2B_PKG="+pkg,
		"ENVD_VERSION="+envd.Version,
		"ENVD_TOKEN="+sandboxToken,
		"CLAIM_VALUE="+claimValue,
		"ROOT_DIR="+d.root,
		"LEGACY_URL="+d.legacy,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestE2BSDK runs the compatibility checks of client/compat.mjs with every pinned SDK version.
func TestE2BSDK(t *testing.T) {
	d := startDaemon(t)
	for _, pkg := range sdkVersions {
		t.Run(pkg, func(t *testing.T) {
			out, err := runSDK(t, d, pkg)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				t.Log(line)
			}
			if err != nil {
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					t.Fatalf("the E2B SDK %s failed checks (exit %d); see FAIL lines above", pkg, exit.ExitCode())
				}
				t.Fatal(err)
			}
			if !strings.Contains(out, "all checks passed") {
				t.Fatalf("compat.mjs ended without its summary line")
			}
		})
	}
}

// BenchmarkE2BSDK prints the SDK's own figures (commands.run('true') p50/p99, files.write and
// files.read MiB/s) and the legacy POST /execute round trip for comparison; docs/performance.md
// records them. Run: go test ./test/integration/e2b/ -run '^$' -bench E2BSDK -benchtime 1x
func BenchmarkE2BSDK(b *testing.B) {
	d := startDaemon(b)
	for range b.N {
		out, err := runSDK(b, d, sdkVersions[0], "BENCH=1")
		b.Log("\n" + out)
		if err != nil {
			b.Fatal(err)
		}
	}
}
