package blueprint

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestInjectEnv(t *testing.T) {
	pod := func() corev1.PodSpec {
		return corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "main", Env: []corev1.EnvVar{{Name: "KEEP", Value: "t"}}}, {Name: "side", EnvFrom: []corev1.EnvFromSource{{}}}},
		}
	}
	env := func(name, value, container string) extensionsv1beta1.EnvVar {
		return extensionsv1beta1.EnvVar{Name: name, Value: value, ContainerName: container}
	}
	tests := []struct {
		name    string
		policy  extensionsv1beta1.EnvVarsInjectionPolicy
		env     []extensionsv1beta1.EnvVar
		wantErr bool
		want    func(*corev1.PodSpec)
	}{
		{"no env is always fine", "", nil, false, func(*corev1.PodSpec) {}},
		{"disallowed by default", "", []extensionsv1beta1.EnvVar{env("A", "1", "")}, true, nil},
		{"disallowed explicitly", extensionsv1beta1.EnvVarsInjectionPolicyDisallowed, []extensionsv1beta1.EnvVar{env("A", "1", "")}, true, nil},
		{"allowed appends to the first container", extensionsv1beta1.EnvVarsInjectionPolicyAllowed, []extensionsv1beta1.EnvVar{env("A", "1", "")},
			false, func(s *corev1.PodSpec) {
				s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "A", Value: "1"})
			}},
		{"allowed into an init container by name", extensionsv1beta1.EnvVarsInjectionPolicyAllowed, []extensionsv1beta1.EnvVar{env("A", "1", "init")},
			false, func(s *corev1.PodSpec) { s.InitContainers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }},
		{"allowed refuses an override", extensionsv1beta1.EnvVarsInjectionPolicyAllowed, []extensionsv1beta1.EnvVar{env("KEEP", "f", "")}, true, nil},
		{"allowed refuses a container with envFrom", extensionsv1beta1.EnvVarsInjectionPolicyAllowed, []extensionsv1beta1.EnvVar{env("A", "1", "side")}, true, nil},
		{"unknown container", extensionsv1beta1.EnvVarsInjectionPolicyOverrides, []extensionsv1beta1.EnvVar{env("A", "1", "nope")}, true, nil},
		{"overrides replaces", extensionsv1beta1.EnvVarsInjectionPolicyOverrides, []extensionsv1beta1.EnvVar{env("KEEP", "f", "main")},
			false, func(s *corev1.PodSpec) { s.Containers[0].Env[0].Value = "f" }},
		{"overrides may use an envFrom container", extensionsv1beta1.EnvVarsInjectionPolicyOverrides, []extensionsv1beta1.EnvVar{env("A", "1", "side")},
			false, func(s *corev1.PodSpec) { s.Containers[1].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pod()
			err := InjectEnv(&got, tt.env, tt.policy)
			if tt.wantErr {
				if !errors.Is(err, ErrEnvInjectionRejected) {
					t.Errorf("err = %v, want ErrEnvInjectionRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := pod()
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeVolumeClaimTemplates(t *testing.T) {
	vct := func(name, size string) agentsv1beta1.PersistentVolumeClaimTemplate {
		v := agentsv1beta1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: name}}
		v.Spec.VolumeName = size // any field tells the entries apart
		return v
	}
	type list = []agentsv1beta1.PersistentVolumeClaimTemplate
	tests := []struct {
		name       string
		tpl, claim list
		policy     extensionsv1beta1.VolumeClaimTemplatesPolicy
		want       list
		wantErr    bool
	}{
		{"no claim templates keeps the template's", list{vct("a", "1")}, nil, "", list{vct("a", "1")}, false},
		{"disallowed by default", list{vct("a", "1")}, list{vct("b", "2")}, "", nil, true},
		{"allowed appends", list{vct("a", "1")}, list{vct("b", "2")}, extensionsv1beta1.VolumeClaimTemplatesPolicyAllowed, list{vct("a", "1"), vct("b", "2")}, false},
		{"allowed refuses a clash", list{vct("a", "1")}, list{vct("a", "2")}, extensionsv1beta1.VolumeClaimTemplatesPolicyAllowed, nil, true},
		{"overrides replaces in place and appends", list{vct("a", "1"), vct("b", "1")}, list{vct("c", "3"), vct("a", "2")},
			extensionsv1beta1.VolumeClaimTemplatesPolicyOverrides, list{vct("a", "2"), vct("b", "1"), vct("c", "3")}, false},
		{"unnamed claim template", nil, list{vct("", "1")}, extensionsv1beta1.VolumeClaimTemplatesPolicyOverrides, nil, true},
		{"duplicate template names", list{vct("a", "1"), vct("a", "2")}, nil, "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MergeVolumeClaimTemplates(tt.tpl, tt.claim, tt.policy)
			if tt.wantErr {
				if !errors.Is(err, ErrVolumeClaimTemplates) {
					t.Errorf("err = %v, want ErrVolumeClaimTemplates", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateAdditionalMetadata(t *testing.T) {
	tests := []struct {
		name    string
		md      extensionsv1beta1.AdditionalPodMetadata
		domains []string
		wantErr bool
	}{
		{"empty", extensionsv1beta1.AdditionalPodMetadata{}, nil, false},
		{"default domain", extensionsv1beta1.AdditionalPodMetadata{Labels: map[string]extensionsv1beta1.LabelValue{"sandbox.users.io/x": "y"}}, nil, false},
		{"subdomain of an allowed domain", extensionsv1beta1.AdditionalPodMetadata{Labels: map[string]extensionsv1beta1.LabelValue{"team.example.com/x": "y"}}, []string{"example.com"}, false},
		{"label without a domain", extensionsv1beta1.AdditionalPodMetadata{Labels: map[string]extensionsv1beta1.LabelValue{"app": "sandbox-router"}}, nil, true},
		{"label of another domain", extensionsv1beta1.AdditionalPodMetadata{Labels: map[string]extensionsv1beta1.LabelValue{"evil.io/x": "y"}}, nil, true},
		{"suffix that is not a subdomain", extensionsv1beta1.AdditionalPodMetadata{Labels: map[string]extensionsv1beta1.LabelValue{"notexample.com/x": "y"}}, []string{"example.com"}, true},
		{"plain annotation", extensionsv1beta1.AdditionalPodMetadata{Annotations: map[string]string{"note": "hi"}}, nil, false},
		{"kubernetes annotation", extensionsv1beta1.AdditionalPodMetadata{Annotations: map[string]string{"pod-security.kubernetes.io/x": "y"}}, nil, true},
		{"k8s.io annotation", extensionsv1beta1.AdditionalPodMetadata{Annotations: map[string]string{"k8s.io/x": "y"}}, nil, true},
		{"safe-to-evict is allowed", extensionsv1beta1.AdditionalPodMetadata{Annotations: map[string]string{agentsv1beta1.SafeToEvictAnnotation: "false"}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateAdditionalMetadata(tt.md, tt.domains)
			if tt.wantErr != (err != nil) {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidMetadata) {
				t.Errorf("err = %v, want ErrInvalidMetadata", err)
			}
		})
	}
}

func TestParseAllowedLabelDomains(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Example.com", []string{"example.com"}},
		{"a.io, b.io\nc.io\r\n\n,", []string{"a.io", "b.io", "c.io"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ParseAllowedLabelDomains(tt.in)); diff != "" {
			t.Errorf("ParseAllowedLabelDomains(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
