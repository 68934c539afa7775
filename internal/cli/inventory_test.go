package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/dist"
)

func TestSummary(t *testing.T) {
	sb := func(name string) UserObject { return UserObject{Kind: "Sandbox", Namespace: "a", Name: name} }
	tests := []struct {
		name string
		objs []UserObject
		want string
	}{
		{name: "none", want: ""},
		{name: "one of a kind is singular", objs: []UserObject{sb("x")}, want: "1 Sandbox"},
		{name: "kinds in fixed order, plurals", objs: []UserObject{
			{Kind: "SandboxTemplate", Namespace: "b", Name: "t"},
			sb("x"), sb("y"),
			{Kind: "SandboxClaim", Namespace: "a", Name: "c"},
			sb("z"),
			{Kind: "SandboxWarmPool", Namespace: "a", Name: "p1"},
			{Kind: "SandboxWarmPool", Namespace: "b", Name: "p2"},
		}, want: "3 Sandboxes, 1 SandboxClaim, 2 SandboxWarmPools, 1 SandboxTemplate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Summary(tt.objs)); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrintUserObjects(t *testing.T) {
	var b strings.Builder
	if err := PrintUserObjects(&b, []UserObject{{Kind: "Sandbox", Namespace: "agents", Name: "s1"},
		{Kind: "SandboxWarmPool", Namespace: "default", Name: "python"}}); err != nil {
		t.Fatal(err)
	}
	want := `KIND             NAMESPACE  NAME
Sandbox          agents     s1
SandboxWarmPool  default    python
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("PrintUserObjects (-want +got):\n%s", diff)
	}
}

func TestParseBundle(t *testing.T) {
	objs, err := ParseBundle([]byte("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\n---\n" +
		"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n  namespace: ns\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, describe(o))
	}
	if diff := cmp.Diff([]string{"Namespace ns", "ServiceAccount ns/sa"}, got); diff != "" {
		t.Errorf("ParseBundle (-want +got):\n%s", diff)
	}

	_, err = ParseBundle([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\nkind: ConfigMap\nmetadata:\n  name: x\n"))
	if err == nil || !strings.Contains(err.Error(), "document 2") || !strings.Contains(err.Error(), "apiVersion") {
		t.Errorf("ParseBundle without apiVersion: err = %v, want one naming document 2 and apiVersion", err)
	}
}

// TestEmbeddedBundle checks the bundle built into the binary holds the four CRDs and the
// controller, so uninstall deletes what install creates.
func TestEmbeddedBundle(t *testing.T) {
	objs, err := ParseBundle(dist.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	var crds []string
	for _, o := range crdsOf(objs) {
		crds = append(crds, o.GetName())
	}
	want := []string{"sandboxclaims.extensions.agents.x-k8s.io", "sandboxes.agents.x-k8s.io", "sandboxsnapshots.snapshots.paddock.dev",
		"sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io"}
	if diff := cmp.Diff(want, crds); diff != "" {
		t.Errorf("CRDs of the embedded bundle (-want +got):\n%s", diff)
	}
	if n := len(withoutCRDs(objs)); n == 0 || n+len(crds) != len(objs) {
		t.Errorf("withoutCRDs kept %d of %d objects", n, len(objs))
	}
}
