package api

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestWarmPoolScaleSubresource does what `kubectl scale swp/NAME --replicas=N` and an HPA do:
// read and write the scale subresource, and see spec.replicas and status.selector through it.
func TestWarmPoolScaleSubresource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, 30*time.Second)
	pool := create(t, builder.MakeWarmPool("scaled", ns, "tpl").Replicas(2).Obj())

	pool.Status = extensionsv1beta1.SandboxWarmPoolStatus{Replicas: 2, ReadyReplicas: 1, Selector: "agents.x-k8s.io/warm-pool-sandbox=0badf00d"}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatalf("writing status: %v", err)
	}

	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, pool, scale); err != nil {
		t.Fatalf("reading scale: %v", err)
	}
	want := autoscalingv1.ScaleSpec{Replicas: 2}
	if diff := cmp.Diff(want, scale.Spec); diff != "" {
		t.Errorf("scale spec (-want +got):\n%s", diff)
	}
	wantStatus := autoscalingv1.ScaleStatus{Replicas: 2, Selector: pool.Status.Selector}
	if diff := cmp.Diff(wantStatus, scale.Status); diff != "" {
		t.Errorf("scale status (-want +got):\n%s", diff)
	}

	scale.Spec.Replicas = 5
	if err := env.Client.SubResource("scale").Update(ctx, pool, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("updating scale: %v", err)
	}
	got := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatalf("reading pool: %v", err)
	}
	if diff := cmp.Diff(ptr.To[int32](5), got.Spec.Replicas); diff != "" {
		t.Errorf("spec.replicas after scaling (-want +got):\n%s", diff)
	}

	scale.Spec.Replicas = -1
	if err := env.Client.SubResource("scale").Update(ctx, pool, client.WithSubResourceBody(scale)); err == nil {
		t.Errorf("scaling to -1 succeeded, want it refused")
	}
}

func TestCRDNamesAndColumns(t *testing.T) {
	ctx := framework.Context(t, 30*time.Second)
	type column struct{ Name, Type, JSONPath string }
	readyStatus := ".status.conditions[?(@.type=='Ready')].status"
	readyReason := ".status.conditions[?(@.type=='Ready')].reason"
	age := column{"Age", "date", ".metadata.creationTimestamp"}
	tests := []struct {
		crd        string
		shortNames []string
		columns    []column
		status     bool
		scale      bool
	}{
		{"sandboxes.agents.x-k8s.io", []string{"sandbox"}, []column{{"Ready", "string", readyStatus}, {"Reason", "string", readyReason}, age}, true, false},
		{"sandboxclaims.extensions.agents.x-k8s.io", []string{"sandboxclaim"}, []column{{"Ready", "string", readyStatus}, {"Sandbox", "string", ".status.sandbox.name"}, {"Reason", "string", readyReason}, age}, true, false},
		{"sandboxtemplates.extensions.agents.x-k8s.io", []string{"sandboxtemplate"}, nil, false, false},
		{"sandboxwarmpools.extensions.agents.x-k8s.io", []string{"swp"}, []column{{"Ready", "integer", ".status.readyReplicas"}, {"Desired", "integer", ".spec.replicas"}, age}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.crd, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: tt.crd}, crd); err != nil {
				t.Fatalf("reading CRD: %v", err)
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("scope = %s, want Namespaced", crd.Spec.Scope)
			}
			if diff := cmp.Diff(tt.shortNames, crd.Spec.Names.ShortNames); diff != "" {
				t.Errorf("short names (-want +got):\n%s", diff)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1beta1" || !crd.Spec.Versions[0].Storage {
				t.Fatalf("versions = %+v, want only v1beta1 as storage", crd.Spec.Versions)
			}
			v := crd.Spec.Versions[0]
			var got []column
			for _, c := range v.AdditionalPrinterColumns {
				got = append(got, column{c.Name, c.Type, c.JSONPath})
			}
			if diff := cmp.Diff(tt.columns, got); diff != "" {
				t.Errorf("printer columns (-want +got):\n%s", diff)
			}
			hasStatus := v.Subresources != nil && v.Subresources.Status != nil
			hasScale := v.Subresources != nil && v.Subresources.Scale != nil
			if hasStatus != tt.status || hasScale != tt.scale {
				t.Errorf("subresources status=%v scale=%v, want status=%v scale=%v", hasStatus, hasScale, tt.status, tt.scale)
			}
		})
	}
}

// TestExamplesApply applies every manifest under examples/ as a user would.
func TestExamplesApply(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, 30*time.Second)
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("finding examples: %v (found %d)", err, len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs, err := framework.ReadExample(filepath.Base(file))
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				u.SetNamespace(ns)
				if err := env.Client.Create(ctx, u); err != nil {
					t.Errorf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}
