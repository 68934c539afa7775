// Package e2b runs the unmodified E2B JavaScript SDK, both pinned versions (client/package.json),
// against an in-process sandboxd through the SDK's debug mode: the SDK then talks straight to
// http://localhost:49983 with no control plane. That port is fixed, so every test that serves
// it holds a machine-wide file lock.
package e2b

import (
	"net"
	"strconv"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
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
	sandboxdtest.LockPort(t, debugPortLock, sandboxd.EnvdPort)
	ls := server.Listeners{
		REST:   sandboxdtest.Listen(t, "127.0.0.1:0"),
		Legacy: sandboxdtest.Listen(t, "127.0.0.1:0"),
		Envd:   sandboxdtest.Listen(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(sandboxd.EnvdPort))),
	}
	root := sandboxdtest.ServeConfig(t, ls, server.Config{Token: sandboxToken, ControlToken: claimToken})
	framework.BindSandboxd(t, "http://"+ls.REST.Addr().String(), claimToken,
		claim.Settings{ClaimName: "e2b", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "CLAIM_VAR", Value: claimValue}}})
	return daemon{root: root, legacy: "http://" + ls.Legacy.Addr().String()}
}

// runSDK runs client/compat.mjs with one SDK version and returns its output.
func runSDK(t testing.TB, d daemon, pkg string, extraEnv ...string) (string, error) {
	return framework.RunNode(t, "client", "compat.mjs", append([]string{
		"E2B_DEBUG=true",
		"E2B_PKG=" + pkg,
		"ENVD_VERSION=" + envd.Version,
		"ENVD_TOKEN=" + sandboxToken,
		"CLAIM_VALUE=" + claimValue,
		"ROOT_DIR=" + d.root,
		"LEGACY_URL=" + d.legacy,
	}, extraEnv...)...)
}

// TestE2BSDK runs the compatibility checks of client/compat.mjs with every pinned SDK version.
func TestE2BSDK(t *testing.T) {
	d := startDaemon(t)
	for _, pkg := range sdkVersions {
		t.Run(pkg, func(t *testing.T) {
			out, err := runSDK(t, d, pkg)
			framework.RequireChecks(t, out, err, "all checks passed")
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
