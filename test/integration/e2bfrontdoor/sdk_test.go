package e2bfrontdoor

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/sandboxd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// sdkVersions are the npm aliases of the pinned SDK versions in client/package.json.
var sdkVersions = []string{"e2b-2.51.0", "e2b-2.50.0"}

// serveSandboxd runs an in-process sandboxd whose envd listener stands in for every sandbox's
// daemon; it returns that listener's address. It requires no token (--allow-unauthenticated: one
// daemon cannot hold every sandbox's token): the front door's data-plane
// check is what the SDK's token meets here.
func serveSandboxd(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	d, err := server.New(server.Config{RootDir: root, Environ: process.MergeEnv(os.Environ(), map[string]string{"HOME": root}),
		AllowUnauthenticated: true, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ls := server.Listeners{REST: listen(), Envd: listen()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("sandboxd: %v", err)
		}
	})
	return ls.Envd.Addr().String()
}

var installOnce sync.Once

func clientDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("client")
	if err != nil {
		t.Fatal(err)
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

// The unmodified SDK, both pinned versions, runs the list through the front door:
// create, commands, files, getInfo, list with a filter and pages, setTimeout, pause and connect,
// kill twice, a wrong key, another namespace's sandbox and an unknown template.
func TestE2BSDKThroughTheFrontDoor(t *testing.T) {
	h := startWith(t, 2, serveSandboxd(t))
	dir := clientDir(t)
	for _, pkg := range sdkVersions {
		t.Run(pkg, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "frontdoor.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "E2B_PKG="+pkg, "E2B_API_URL="+h.url, "E2B_SANDBOX_URL="+h.url,
				"E2B_API_KEY="+h.apiKey, "OTHER_KEY="+h.otherKey, "E2B_DOMAIN="+domain)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				t.Log(line)
			}
			if err != nil || !strings.Contains(string(out), "all checks passed") {
				t.Fatalf("the E2B SDK %s failed through the front door: %v", pkg, err)
			}
		})
	}
}
