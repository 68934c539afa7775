package e2bfrontdoor

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
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

// The unmodified SDK 2.51.0 sets header rules on create and replaces them with updateNetwork
// (client/rules.mjs); the front door runs with the router's install RBAC and admission policy
// (asRouter). Afterwards the claim's policy reads the values from one Secret, owned by the claim,
// holding the update's values: the create's Secret is gone, and another namespace's key changed
// nothing.
func TestE2BSDKNetworkRulesBecomeASecret(t *testing.T) {
	h := startAs(t, 1, serveSandboxd(t), asRouter)
	out, err := framework.RunNode(t, "client", "rules.mjs", sdkEnv(h, "e2b-2.51.0")...)
	framework.RequireChecks(t, out, err, "all checks passed")
	_, id, ok := strings.Cut(out, "SANDBOX ")
	if id, _, _ = strings.Cut(id, "\n"); !ok || id == "" {
		t.Fatalf("the script printed no sandbox ID:\n%s", out)
	}
	ctx := framework.Context(t, framework.DefaultTimeout)
	claim := h.claim(t, id)
	var policy egress.Policy
	if err := json.Unmarshal([]byte(claim.Annotations[egress.PolicyAnnotation]), &policy); err != nil {
		t.Fatalf("claim policy %q: %v", claim.Annotations[egress.PolicyAnnotation], err)
	}
	if len(policy.Inject) != 1 || policy.Inject[0].Domain != "api.example.test" || len(policy.Inject[0].Headers) != 2 {
		t.Fatalf("claim policy %+v, want one inject rule for api.example.test with two headers", policy)
	}
	var secrets corev1.SecretList
	if err := env.Client.List(ctx, &secrets, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	var rules []corev1.Secret
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, "e2b-egress-") {
			rules = append(rules, s)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%d rules Secrets in %s, want 1 (the update's; the create's deleted)", len(rules), h.ns)
	}
	s := rules[0]
	got := map[string]string{}
	for _, hdr := range policy.Inject[0].Headers {
		if hdr.SecretKeyRef.Name != s.Name {
			t.Errorf("header %s reads Secret %s, want %s", hdr.Name, hdr.SecretKeyRef.Name, s.Name)
		}
		got[hdr.Name] = string(s.Data[hdr.SecretKeyRef.Key])
	}
	if want := map[string]string{"Authorization": "Bearer sk-second", "X-Team": "team-2"}; !maps.Equal(got, want) {
		t.Errorf("header values through the Secret %v, want %v", got, want)
	}
	if got := claim.Annotations[e2bapi.RulesSecretAnnotation]; got != s.Name {
		t.Errorf("claim annotation %s = %q, want the Secret %s", e2bapi.RulesSecretAnnotation, got, s.Name)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != claim.UID || s.OwnerReferences[0].Kind != "SandboxClaim" {
		t.Errorf("Secret %s owners %+v, want the claim %s (uid %s)", s.Name, s.OwnerReferences, claim.Name, claim.UID)
	}
	for k, v := range claim.Annotations {
		if strings.Contains(v, "sk-second") || strings.Contains(v, "sk-first") {
			t.Errorf("claim annotation %s holds a header value: %s", k, v)
		}
	}
}
