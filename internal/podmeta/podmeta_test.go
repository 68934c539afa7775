package podmeta

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/naming"
)

var (
	hash      = naming.NameHash("sb")
	claimRef  = &metav1.OwnerReference{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "c1", UID: "claim-uid-1", Controller: ptr.To(true)}
	poolRef   = &metav1.OwnerReference{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxWarmPool", Name: "p1", UID: "pool-uid-1", Controller: ptr.To(true)}
	otherRef  = &metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "SandboxClaim", Name: "x", UID: "x-uid", Controller: ptr.To(true)}
	extLabels = map[string]string{
		agentsv1beta1.WarmPoolSandboxLabel:        "poolhash",
		agentsv1beta1.SandboxTemplateRefHashLabel: "tplhash",
		"team": "not-copied",
	}
)

func TestApply(t *testing.T) {
	tests := []struct {
		name                   string
		src                    Source
		labels, annotations    map[string]string
		wantLabels, wantAnnots map[string]string
	}{
		{
			name:       "new pod without template metadata gets only the tracking label",
			src:        Source{SandboxName: "sb"},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
		},
		{
			name: "new pod: user keys copied and listed, reserved keys dropped",
			src: Source{SandboxName: "sb",
				TemplateLabels: map[string]string{"b": "2", "a": "1", agentsv1beta1.SandboxNameHashLabel: "forged",
					"extensions.agents.x-k8s.io/x": "y", agentsv1beta1.ClaimUIDLabel: "forged"},
				TemplateAnnotations: map[string]string{"note": "n", agentsv1beta1.TraceContextAnnotation: "{}",
					agentsv1beta1.PropagatedLabelsAnnotation: "forged"},
			},
			wantLabels: map[string]string{"a": "1", "b": "2", agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnots: map[string]string{"note": "n",
				agentsv1beta1.PropagatedLabelsAnnotation: "a,b", agentsv1beta1.PropagatedAnnotationsAnnotation: "note"},
		},
		{
			name: "a pod template with an egress policy marks the Pod policed, whatever the user's labels say",
			src: Source{SandboxName: "sb",
				TemplateLabels:      map[string]string{egress.PolicedLabel: "no"},
				TemplateAnnotations: map[string]string{egress.PolicyAnnotation: "{}"},
			},
			wantLabels: map[string]string{egress.PolicedLabel: "true", agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnots: map[string]string{egress.PolicyAnnotation: "{}",
				agentsv1beta1.PropagatedLabelsAnnotation: egress.PolicedLabel, agentsv1beta1.PropagatedAnnotationsAnnotation: egress.PolicyAnnotation},
		},
		{
			name:       "a policy removed from the pod template unmarks the Pod, and a forged mark is removed",
			src:        Source{SandboxName: "sb", TemplateLabels: map[string]string{egress.PolicedLabel: "true"}},
			labels:     map[string]string{egress.PolicedLabel: "true", agentsv1beta1.SandboxNameHashLabel: hash},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnots: map[string]string{agentsv1beta1.PropagatedLabelsAnnotation: egress.PolicedLabel},
		},
		{
			name: "existing pod: removed template keys are pruned, foreign keys kept, values updated",
			src: Source{SandboxName: "sb",
				TemplateLabels:      map[string]string{"a": "new"},
				TemplateAnnotations: map[string]string{},
			},
			labels: map[string]string{"a": "old", "gone": "x", "kubelet-owned": "k", agentsv1beta1.SandboxNameHashLabel: "stale"},
			annotations: map[string]string{"old-note": "x", "other": "o",
				agentsv1beta1.PropagatedLabelsAnnotation: "a,gone", agentsv1beta1.PropagatedAnnotationsAnnotation: "old-note"},
			wantLabels: map[string]string{"a": "new", "kubelet-owned": "k", agentsv1beta1.SandboxNameHashLabel: hash},
			wantAnnots: map[string]string{"other": "o", agentsv1beta1.PropagatedLabelsAnnotation: "a"},
		},
		{
			name:   "existing pod: reserved keys recorded by an older controller are scrubbed, except the protected ones",
			src:    Source{SandboxName: "sb"},
			labels: map[string]string{agentsv1beta1.LaunchTypeLabel: "warm", agentsv1beta1.SandboxNameHashLabel: hash},
			annotations: map[string]string{agentsv1beta1.SandboxTemplateRefAnnotation: "t", agentsv1beta1.TraceContextAnnotation: "{}",
				agentsv1beta1.PropagatedLabelsAnnotation:      agentsv1beta1.LaunchTypeLabel + "," + agentsv1beta1.SandboxNameHashLabel,
				agentsv1beta1.PropagatedAnnotationsAnnotation: agentsv1beta1.SandboxTemplateRefAnnotation + "," + agentsv1beta1.TraceContextAnnotation + "," + agentsv1beta1.PropagatedLabelsAnnotation},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
		},
		{
			name:       "pool-owned sandbox: pool and template labels copied, other sandbox labels not",
			src:        Source{SandboxName: "sb", Controller: poolRef, SandboxLabels: extLabels},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.WarmPoolSandboxLabel: "poolhash", agentsv1beta1.SandboxTemplateRefHashLabel: "tplhash"},
		},
		{
			name:   "claim-owned sandbox: pool label removed, template label kept, claim identity added",
			src:    Source{SandboxName: "sb", Controller: claimRef, SandboxLabels: extLabels},
			labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.WarmPoolSandboxLabel: "poolhash", agentsv1beta1.SandboxTemplateRefHashLabel: "tplhash"},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.SandboxTemplateRefHashLabel: "tplhash",
				agentsv1beta1.ClaimUIDLabel: "claim-uid-1"},
			wantAnnots: map[string]string{agentsv1beta1.ClaimNameAnnotation: "c1"},
		},
		{
			name:        "controller outside the extensions group: extension labels and claim identity removed",
			src:         Source{SandboxName: "sb", Controller: otherRef, SandboxLabels: extLabels},
			labels:      map[string]string{agentsv1beta1.WarmPoolSandboxLabel: "poolhash", agentsv1beta1.SandboxTemplateRefHashLabel: "tplhash", agentsv1beta1.ClaimUIDLabel: "claim-uid-1"},
			annotations: map[string]string{agentsv1beta1.ClaimNameAnnotation: "c1"},
			wantLabels:  map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
		},
		{
			name:        "unowned sandbox released by its claim loses the claim identity",
			src:         Source{SandboxName: "sb"},
			labels:      map[string]string{agentsv1beta1.ClaimUIDLabel: "claim-uid-1", agentsv1beta1.SandboxNameHashLabel: hash},
			annotations: map[string]string{agentsv1beta1.ClaimNameAnnotation: "c1"},
			wantLabels:  map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
		},
		{
			name:       "created-by is normalised",
			src:        Source{SandboxName: "sb", SandboxLabels: map[string]string{agentsv1beta1.CreatedByLabel: "my-script"}},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.CreatedByLabel: "unknown"},
		},
		{
			name:       "created-by known value kept",
			src:        Source{SandboxName: "sb", SandboxLabels: map[string]string{agentsv1beta1.CreatedByLabel: "python-client"}},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash, agentsv1beta1.CreatedByLabel: "python-client"},
		},
		{
			name:       "created-by removed when the sandbox no longer has it",
			src:        Source{SandboxName: "sb"},
			labels:     map[string]string{agentsv1beta1.CreatedByLabel: "go-client"},
			wantLabels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inLabels, inAnnots := cloneOrNil(tt.labels), cloneOrNil(tt.annotations)
			gotLabels, gotAnnots := Apply(tt.src, tt.labels, tt.annotations)
			if diff := cmp.Diff(tt.wantLabels, gotLabels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnnots, gotAnnots); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(inLabels, tt.labels); diff != "" {
				t.Errorf("Apply modified its input labels (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(inAnnots, tt.annotations); diff != "" {
				t.Errorf("Apply modified its input annotations (-before +after):\n%s", diff)
			}
		})
	}
}

// Applying twice changes nothing: the controller must not patch a Pod on every pass.
func TestApplyIsIdempotent(t *testing.T) {
	src := Source{SandboxName: "sb", Controller: claimRef, SandboxLabels: extLabels,
		TemplateLabels: map[string]string{"a": "1"}, TemplateAnnotations: map[string]string{"n": "v"}}
	l1, a1 := Apply(src, nil, nil)
	l2, a2 := Apply(src, l1, a1)
	if diff := cmp.Diff(l1, l2); diff != "" {
		t.Errorf("labels changed on the second pass (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(a1, a2); diff != "" {
		t.Errorf("annotations changed on the second pass (-first +second):\n%s", diff)
	}
}

func TestIsReserved(t *testing.T) {
	tests := []struct {
		key                  string
		wantLabel, wantAnnot bool
	}{
		{"app", false, false},
		{"example.com/x", false, false},
		{agentsv1beta1.AdoptableLabel, true, true},
		{"extensions.agents.x-k8s.io/anything", true, true},
		{agentsv1beta1.TraceContextAnnotation, false, true},
		{"sub.agents.x-k8s.io/x", false, false},
	}
	for _, tt := range tests {
		if got := IsReservedLabel(tt.key); got != tt.wantLabel {
			t.Errorf("IsReservedLabel(%q) = %v, want %v", tt.key, got, tt.wantLabel)
		}
		if got := IsReservedAnnotation(tt.key); got != tt.wantAnnot {
			t.Errorf("IsReservedAnnotation(%q) = %v, want %v", tt.key, got, tt.wantAnnot)
		}
	}
}

func cloneOrNil(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
