package blueprint

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

func template() *extensionsv1beta1.SandboxTemplate {
	return &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns", UID: "tpl-uid"},
		Spec: extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{
				ObjectMeta: agentsv1beta1.PodMetadata{Labels: map[string]string{"team": "a"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img"}}},
			},
		}},
	}
}

func TestApplySecureDefaults(t *testing.T) {
	secureDNS := func(s *corev1.PodSpec) {
		s.DNSPolicy = corev1.DNSNone
		s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8", "1.1.1.1"}}
	}
	tests := []struct {
		name string
		tpl  func(*extensionsv1beta1.SandboxTemplateSpec)
		pod  func(*corev1.PodSpec)
		want func(*corev1.PodSpec)
	}{
		{"default policy: no token, public DNS", nil, nil, func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(false); secureDNS(s) }},
		{"explicit token and DNS policy kept", nil,
			func(s *corev1.PodSpec) {
				s.AutomountServiceAccountToken = ptr.To(true)
				s.DNSPolicy = corev1.DNSClusterFirst
			},
			func(s *corev1.PodSpec) {
				s.AutomountServiceAccountToken = ptr.To(true)
				s.DNSPolicy = corev1.DNSClusterFirst
			}},
		{"custom policy leaves DNS alone",
			func(s *extensionsv1beta1.SandboxTemplateSpec) {
				s.NetworkPolicy = &extensionsv1beta1.NetworkPolicySpec{}
			}, nil,
			func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(false) }},
		{"unmanaged policy leaves DNS alone",
			func(s *extensionsv1beta1.SandboxTemplateSpec) {
				s.NetworkPolicyManagement = extensionsv1beta1.NetworkPolicyManagementUnmanaged
			}, nil,
			func(s *corev1.PodSpec) { s.AutomountServiceAccountToken = ptr.To(false) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := template().Spec
			if tt.tpl != nil {
				tt.tpl(&spec)
			}
			got, want := corev1.PodSpec{}, corev1.PodSpec{}
			if tt.pod != nil {
				tt.pod(&got)
			}
			tt.want(&want)
			ApplySecureDefaults(&spec, &got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHashAndStale(t *testing.T) {
	tpl := template()
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	member := PoolMember(pool, tpl, PoolOptions{})
	if Hash(tpl.Spec.SandboxBlueprint) != member.Labels[agentsv1beta1.SandboxTemplateHashLabel] || len(Hash(tpl.Spec.SandboxBlueprint)) != 8 {
		t.Fatalf("member hash label %q, want Hash of the blueprint", member.Labels[agentsv1beta1.SandboxTemplateHashLabel])
	}
	tests := []struct {
		name   string
		edit   func(*extensionsv1beta1.SandboxTemplate)
		member func(*agentsv1beta1.Sandbox)
		stale  bool
	}{
		{"unchanged", nil, nil, false},
		{"image changed", func(t *extensionsv1beta1.SandboxTemplate) { t.Spec.PodTemplate.Spec.Containers[0].Image = "v2" }, nil, true},
		{"service changed", func(t *extensionsv1beta1.SandboxTemplate) { t.Spec.Service = ptr.To(true) }, nil, true},
		{"volume claim template added", func(t *extensionsv1beta1.SandboxTemplate) {
			t.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "d"}}}
		}, nil, true},
		{"pod metadata only", func(t *extensionsv1beta1.SandboxTemplate) { t.Spec.PodTemplate.ObjectMeta.Labels["team"] = "b" }, nil, false},
		{"other template", nil, func(sb *agentsv1beta1.Sandbox) {
			sb.Labels[agentsv1beta1.SandboxTemplateRefHashLabel] = TemplateRefHash("other")
		}, true},
		{"label lost but spec equal", nil, func(sb *agentsv1beta1.Sandbox) { delete(sb.Labels, agentsv1beta1.SandboxTemplateHashLabel) }, false},
		// As upstream: the hash covers the blueprint, not the policies around it.
		{"network policy edit alone", func(t *extensionsv1beta1.SandboxTemplate) {
			t.Spec.NetworkPolicy = &extensionsv1beta1.NetworkPolicySpec{}
		}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited, sb := template(), member.DeepCopy()
			if tt.edit != nil {
				tt.edit(edited)
			}
			if tt.member != nil {
				tt.member(sb)
			}
			if got := Stale(edited, sb); got != tt.stale {
				t.Errorf("Stale = %v, want %v", got, tt.stale)
			}
		})
	}
}

func TestPoolMember(t *testing.T) {
	tpl := template()
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	sb := PoolMember(pool, tpl, PoolOptions{SafeToEvict: true})
	wantLabels := map[string]string{
		agentsv1beta1.WarmPoolSandboxLabel:        PoolHash("pool"),
		agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash("tpl"),
		agentsv1beta1.SandboxPodTemplateHashLabel: PodTemplateHash(tpl.Spec.PodTemplate), //nolint:staticcheck // still written for wire compatibility
		agentsv1beta1.SandboxTemplateHashLabel:    Hash(tpl.Spec.SandboxBlueprint),
		agentsv1beta1.LaunchTypeLabel:             agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.CreatedByLabel:              CreatedByController,
	}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if sb.GenerateName != "pool-" || sb.Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation] != "true" {
		t.Errorf("generateName %q, safe-to-evict %q", sb.GenerateName, sb.Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation])
	}
	if name, ok := PoolOf(sb); !ok || name != "pool" {
		t.Errorf("PoolOf = %q, %v", name, ok)
	}
	if tpl.Spec.PodTemplate.Spec.AutomountServiceAccountToken != nil || tpl.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.WarmPoolSandboxLabel] != "" {
		t.Error("PoolMember modified the template")
	}
	// A template's own safe-to-evict value survives.
	tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{agentsv1beta1.SafeToEvictAnnotation: "false"}
	if got := PoolMember(pool, tpl, PoolOptions{SafeToEvict: true}).Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation]; got != "false" {
		t.Errorf("safe-to-evict = %q, want the template's false", got)
	}
}

// Members of a sandboxd template start locked in every container; others do not, and the lock
// does not make a member stale.
func TestPoolMemberOfASandboxdTemplateIsLocked(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	tpl := template()
	tpl.Spec.PodTemplate.Spec.Containers = append(tpl.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: "sidecar",
		Env: []corev1.EnvVar{{Name: sandboxd.RequireClaimEnv, Value: "false"}}})
	if sb := PoolMember(pool, tpl, PoolOptions{}); LockedUntilClaimed(&sb.Spec.PodTemplate.Spec) {
		t.Fatal("a member of a template without the runtime annotation is locked")
	}
	tpl.Annotations = map[string]string{extensionsv1beta1.RuntimeAnnotation: extensionsv1beta1.RuntimeSandboxd}
	sb := PoolMember(pool, tpl, PoolOptions{})
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		var values []string
		for _, e := range c.Env {
			if e.Name == sandboxd.RequireClaimEnv {
				values = append(values, e.Value)
			}
		}
		if diff := cmp.Diff([]string{"true"}, values); diff != "" {
			t.Errorf("container %q %s (-want +got):\n%s", c.Name, sandboxd.RequireClaimEnv, diff)
		}
	}
	if tpl.Spec.PodTemplate.Spec.Containers[1].Env[0].Value != "false" {
		t.Error("PoolMember modified the template")
	}
	sb.Labels[agentsv1beta1.SandboxTemplateHashLabel] = "old" // force the slow path
	if Stale(tpl, sb) {
		t.Error("a locked member of an unchanged template is stale")
	}
}

func TestNameMember(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	sb := PoolMember(pool, template(), PoolOptions{})
	NameMember(sb, sb.GenerateName, "x7k2p")
	want := map[string]string{
		agentsv1beta1.SandboxTemplateRefAnnotation: "tpl",
		agentsv1beta1.PodNameAnnotation:            "pool-x7k2p",
	}
	if sb.Name != "pool-x7k2p" || sb.GenerateName != "" {
		t.Errorf("name %q, generateName %q; want pool-x7k2p and none", sb.Name, sb.GenerateName)
	}
	if diff := cmp.Diff(want, sb.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func claim() *extensionsv1beta1.SandboxClaim {
	return &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid", Labels: map[string]string{agentsv1beta1.CreatedByLabel: "go-client"}},
		Spec:       extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
}

func TestAdopt(t *testing.T) {
	tpl := template()
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	sb := PoolMember(pool, tpl, PoolOptions{SafeToEvict: true})
	sb.Name = "pool-abcde"
	c := claim()
	c.Spec.AdditionalPodMetadata.Labels = map[string]extensionsv1beta1.LabelValue{"sandbox.users.io/x": "y"}
	if err := Adopt(sb, c, tpl); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{ControllerRef("SandboxClaim", c)}, sb.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{
		agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash("tpl"),
		agentsv1beta1.LaunchTypeLabel:             agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.CreatedByLabel:              "go-client",
		agentsv1beta1.ClaimUIDLabel:               "claim-uid",
	}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantPod := agentsv1beta1.PodMetadata{Labels: map[string]string{
		"team": "a", "sandbox.users.io/x": "y", agentsv1beta1.ClaimUIDLabel: "claim-uid",
		agentsv1beta1.SandboxTemplateRefHashLabel: TemplateRefHash("tpl"), agentsv1beta1.CreatedByLabel: "go-client",
	}}
	if diff := cmp.Diff(wantPod, sb.Spec.PodTemplate.ObjectMeta); diff != "" {
		t.Errorf("pod metadata (-want +got):\n%s", diff)
	}
	if _, ok := PoolOf(sb); ok {
		t.Error("adopted Sandbox still belongs to the pool")
	}
	if changed, err := RefreshClaimMetadata(sb.DeepCopy(), c, tpl); err != nil || changed {
		t.Errorf("RefreshClaimMetadata right after Adopt = %v, %v; want no change", changed, err)
	}
}

func TestColdSandbox(t *testing.T) {
	tpl := template()
	tpl.Spec.EnvVarsInjectionPolicy = extensionsv1beta1.EnvVarsInjectionPolicyAllowed
	c := claim()
	c.Annotations = map[string]string{agentsv1beta1.TraceContextAnnotation: `{"traceparent":"x"}`}
	c.Spec.Env = []extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}}
	sb, err := ColdSandbox(c, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name != "c" || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold || sb.Labels[agentsv1beta1.ClaimUIDLabel] != "claim-uid" {
		t.Errorf("cold Sandbox %s labels %v", sb.Name, sb.Labels)
	}
	if sb.Annotations[agentsv1beta1.TraceContextAnnotation] == "" || sb.Annotations[agentsv1beta1.SandboxTemplateRefAnnotation] != "tpl" ||
		sb.Annotations[agentsv1beta1.PodNameAnnotation] != "c" {
		t.Errorf("annotations %v", sb.Annotations)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "A", Value: "1"}}, sb.Spec.PodTemplate.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(tpl.Spec.PodTemplate.Spec.Containers[0].Env) != 0 {
		t.Error("ColdSandbox modified the template")
	}
	c.Spec.AdditionalPodMetadata.Labels = map[string]extensionsv1beta1.LabelValue{"team": "b"}
	if _, err := ColdSandbox(c, tpl); !errors.Is(err, ErrMetadataConflict) {
		t.Errorf("conflicting label: err %v, want ErrMetadataConflict", err)
	}
}

func TestValidateNameservers(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"198.19.64.53"}, ""},
		{[]string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"}, ""},
		{nil, "give 1 to 3 IP addresses, not 0"},
		{[]string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}, "not 4"},
		{[]string{"dns.google"}, `"dns.google" is not an IP address`},
	} {
		err := ValidateNameservers(tc.addrs)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ValidateNameservers(%v) = %v, want %q", tc.addrs, err, tc.want)
		}
	}
}

func TestClaimEgressPolicyReplacesTheTemplates(t *testing.T) {
	const tplPolicy, claimPolicy = `{"deny":["0.0.0.0/0"]}`, `{"allow":["pypi.org"],"deny":["0.0.0.0/0"]}`
	tpl := template()
	tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{egress.PolicyAnnotation: tplPolicy}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no claim policy: the template's", nil, tplPolicy},
		{"the claim's", map[string]string{egress.PolicyAnnotation: claimPolicy}, claimPolicy},
		{"an empty claim policy opens what the template closed", map[string]string{egress.PolicyAnnotation: `{}`}, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claim()
			c.Annotations = tc.annotations
			sb, err := ColdSandbox(c, tpl)
			if err != nil {
				t.Fatal(err)
			}
			if got := sb.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]; got != tc.want {
				t.Errorf("cold Sandbox's pod policy %q, want %q", got, tc.want)
			}
			pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
			member := PoolMember(pool, tpl, PoolOptions{})
			if got := member.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]; got != tplPolicy {
				t.Errorf("warm member's pod policy %q, want the template's", got)
			}
			if err := Adopt(member, c, tpl); err != nil {
				t.Fatal(err)
			}
			if got := member.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]; got != tc.want {
				t.Errorf("adopted member's pod policy %q, want %q", got, tc.want)
			}
		})
	}
	if got := tpl.Spec.PodTemplate.ObjectMeta.Annotations[egress.PolicyAnnotation]; got != tplPolicy {
		t.Errorf("the template was modified: %q", got)
	}
}
