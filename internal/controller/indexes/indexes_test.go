package indexes

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestIndexFunctions(t *testing.T) {
	labelled := metav1.ObjectMeta{Labels: map[string]string{
		agentsv1beta1.SandboxNameHashLabel: "h1", agentsv1beta1.WarmPoolSandboxLabel: "p1"}}
	tests := []struct {
		name string
		fn   client.IndexerFunc
		obj  client.Object
		want []string
	}{
		{"pod with the label", PodBySandboxNameHash, &corev1.Pod{ObjectMeta: labelled}, []string{"h1"}},
		{"pod without the label", PodBySandboxNameHash, &corev1.Pod{}, nil},
		{"pod with an empty label", PodBySandboxNameHash, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: ""}}}, nil},
		{"sandbox in a pool", SandboxByWarmPool, &agentsv1beta1.Sandbox{ObjectMeta: labelled}, []string{"p1"}},
		{"sandbox outside pools", SandboxByWarmPool, &agentsv1beta1.Sandbox{}, nil},
		{"bound sandbox", SandboxByClaimUID, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{agentsv1beta1.ClaimUIDLabel: "u1"}}}, []string{"u1"}},
		{"unbound sandbox", SandboxByClaimUID, &agentsv1beta1.Sandbox{}, nil},
		{"pool", WarmPoolByTemplate, &extensionsv1beta1.SandboxWarmPool{Spec: extensionsv1beta1.SandboxWarmPoolSpec{TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: "t"}}}, []string{"t"}},
		{"not a pool", WarmPoolByTemplate, &corev1.Pod{}, nil},
		{"claim", ClaimByWarmPool, &extensionsv1beta1.SandboxClaim{Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "p"}}}, []string{"p"}},
		{"not a claim", ClaimByWarmPool, &corev1.Pod{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.fn(tt.obj)); diff != "" {
				t.Errorf("index (-want +got):\n%s", diff)
			}
		})
	}
}

type recordingIndexer struct{ fields []string }

func (r *recordingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	r.fields = append(r.fields, field)
	return nil
}

func TestRegisterAddsEveryIndex(t *testing.T) {
	var r recordingIndexer
	if err := Register(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	want := []string{agentsv1beta1.PodNameHashIndex, agentsv1beta1.SandboxWarmPoolIndex, agentsv1beta1.SandboxClaimUIDIndex, extensionsv1beta1.TemplateRefField, extensionsv1beta1.WarmPoolRefField}
	if diff := cmp.Diff(want, r.fields); diff != "" {
		t.Errorf("registered indexes (-want +got):\n%s", diff)
	}
}
