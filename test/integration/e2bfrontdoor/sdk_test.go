package e2bfrontdoor

import (
	"testing"

	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// sdkVersions are the npm aliases of the pinned SDK versions in client/package.json.
var sdkVersions = []string{"e2b-2.51.0", "e2b-2.50.0"}

// serveSandboxd runs an in-process sandboxd whose envd listener stands in for every sandbox's
// daemon; it returns that listener's address. It requires no token (--allow-unauthenticated: one
// daemon cannot hold every sandbox's token): the front door's data-plane
// check is what the SDK's token meets here.
func serveSandboxd(t *testing.T) string {
	t.Helper()
	ls := server.Listeners{REST: sandboxdtest.Listen(t, "127.0.0.1:0"), Envd: sandboxdtest.Listen(t, "127.0.0.1:0")}
	sandboxdtest.ServeConfig(t, ls, server.Config{AllowUnauthenticated: true})
	return ls.Envd.Addr().String()
}

// sdkEnv points a client script at h's front door with both namespaces' keys.
func sdkEnv(h *harness, pkg string) []string {
	return []string{"E2B_PKG=" + pkg, "E2B_API_URL=" + h.url, "E2B_SANDBOX_URL=" + h.url,
		"E2B_API_KEY=" + h.apiKey, "OTHER_KEY=" + h.otherKey, "E2B_DOMAIN=" + domain}
}

// The unmodified SDK, both pinned versions, runs the list through the front door:
// create, commands, files, getInfo, list with a filter and pages, setTimeout, pause and connect,
// kill twice, a wrong key, another namespace's sandbox and an unknown template.
func TestE2BSDKThroughTheFrontDoor(t *testing.T) {
	h := startWith(t, 2, serveSandboxd(t))
	for _, pkg := range sdkVersions {
		t.Run(pkg, func(t *testing.T) {
			out, err := framework.RunNode(t, "client", "frontdoor.mjs", sdkEnv(h, pkg)...)
			framework.RequireChecks(t, out, err, "all checks passed")
		})
	}
}

// The unmodified SDK, both pinned versions, runs the snapshot and fork calls through the front
// door (client/snapshot.mjs): createSnapshot unnamed and named, listSnapshots of a sandbox, by
// name and in pages, create from a snapshot ID, fork of 2 and of the default 1, a failed
// capture, deleteSnapshot twice, and another namespace's key refused at every call. The
// captures are played at the Pod level (snapshots_test.go). The front door runs with the
// router's install RBAC (asRouter), so a verb the calls need and the role lacks fails here.
func TestE2BSDKSnapshotsThroughTheFrontDoor(t *testing.T) {
	h := startAs(t, 1, serveSandboxd(t), asRouter)
	playCaptures(t, h)
	for _, pkg := range sdkVersions {
		t.Run(pkg, func(t *testing.T) {
			out, err := framework.RunNode(t, "client", "snapshot.mjs", append(sdkEnv(h, pkg), "FAIL_KEY="+failCaptureKey)...)
			framework.RequireChecks(t, out, err, "all checks passed")
		})
	}
}
