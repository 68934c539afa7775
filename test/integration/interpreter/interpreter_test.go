// Package interpreter runs the unmodified @e2b/code-interpreter SDK (client/package.json, pinned by
// its lockfile) against an in-process sandboxd serving the code interpreter, through the SDK's
// debug mode: the SDK then calls http://localhost:49999 with no control plane. That port is
// fixed, so every test that serves it holds a machine-wide file lock.
package interpreter

import (
	"net"
	"strconv"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// portLock serializes every process on this machine that serves the interpreter's debug port.
const portLock = "/tmp/paddock-e2b-interpreter-port.lock"

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
	sandboxdtest.LockPort(t, portLock, sandboxd.InterpreterPort)
	ls := server.Listeners{
		REST:        sandboxdtest.Listen(t, "127.0.0.1:0"),
		Interpreter: sandboxdtest.Listen(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(sandboxd.InterpreterPort))),
	}
	root := sandboxdtest.ServeConfig(t, ls, server.Config{Token: sandboxToken, ControlToken: controlToken, RequireClaim: true,
		InterpreterPython: sandboxdtest.DebianPython})
	return daemon{root: root, rest: "http://" + ls.REST.Addr().String()}
}

// claimIt applies claim settings with a variable, as the claim controller does.
func (d daemon) claimIt(t testing.TB) {
	t.Helper()
	framework.BindSandboxd(t, d.rest, controlToken, claim.Settings{ClaimName: "ci", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "CLAIM_VAR", Value: claimValue}}})
}

// runSDK runs client/ci.mjs in mode and returns its output.
func runSDK(t testing.TB, d daemon, mode string) (string, error) {
	return framework.RunNode(t, "client", "ci.mjs", "E2B_DEBUG=true", "MODE="+mode, "TOKEN="+sandboxToken, "ROOT_DIR="+d.root, "CLAIM_VALUE="+claimValue)
}

// TestCodeInterpreterSDK runs every check of client/ci.mjs: first against the locked warm
// member, then, once claimed, results, state, streaming, errors, display, charts, DataFrames,
// contexts, languages, env vars, timeouts and a wrong token.
func TestCodeInterpreterSDK(t *testing.T) {
	d := startDaemon(t)
	out, err := runSDK(t, d, "locked")
	framework.RequireChecks(t, out, err, "ok an unclaimed warm member refuses the sandbox token")
	d.claimIt(t)
	out, err = runSDK(t, d, "")
	framework.RequireChecks(t, out, err, "all checks passed")
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
