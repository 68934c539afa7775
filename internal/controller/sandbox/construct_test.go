package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/naming"
)

var testOwner = metav1.OwnerReference{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "sb", UID: "sb-uid",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}

func sandbox(mutate ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", UID: "sb-uid", Generation: 3},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img"}}}},
		}},
	}
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func TestConstructPod(t *testing.T) {
	hash := naming.NameHash("sb")
	tests := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want func(*corev1.Pod)
	}{
		{
			name: "minimal",
			sb:   sandbox(),
			want: func(*corev1.Pod) {},
		},
		{
			name: "template metadata copied without reserved keys; sandbox labels not copied except created-by",
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Labels = map[string]string{"team": "x", agentsv1beta1.CreatedByLabel: "python-client"}
				sb.Spec.PodTemplate.ObjectMeta = agentsv1beta1.PodMetadata{
					Labels:      map[string]string{"app": "a", agentsv1beta1.AdoptableLabel: "true"},
					Annotations: map[string]string{"note": "n", agentsv1beta1.TraceContextAnnotation: "{}"},
				}
			}),
			want: func(p *corev1.Pod) {
				p.Labels["app"] = "a"
				p.Labels[agentsv1beta1.CreatedByLabel] = "python-client"
				p.Annotations = map[string]string{"note": "n",
					agentsv1beta1.PropagatedLabelsAnnotation: "app", agentsv1beta1.PropagatedAnnotationsAnnotation: "note"}
			},
		},
		{
			name: "claim volumes replace same-named user volumes and come last",
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{emptyDir("data"), emptyDir("tmp")}
				sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{
					{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"}},
					{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "cache"}},
				}
			}),
			want: func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{emptyDir("tmp"), claimVolume("data", "data-sb"), claimVolume("cache", "cache-sb")}
			},
		},
		{
			name: "template hostname wins",
			sb:   sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.Hostname = "box" }),
			want: func(p *corev1.Pod) { p.Spec.Hostname = "box" },
		},
		{
			name: "claim-owned sandbox puts the claim identity on the pod",
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim",
					Name: "c", UID: "c-uid", Controller: ptr.To(true)}}
			}),
			want: func(p *corev1.Pod) {
				p.Labels[agentsv1beta1.ClaimUIDLabel] = "c-uid"
				p.Annotations = map[string]string{agentsv1beta1.ClaimNameAnnotation: "c"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{testOwner},
					Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: hash}},
				Spec: *tt.sb.Spec.PodTemplate.Spec.DeepCopy(),
			}
			want.Spec.Hostname = "sb"
			tt.want(want)
			before := tt.sb.DeepCopy()
			if diff := cmp.Diff(want, constructPod(tt.sb, testOwner)); diff != "" {
				t.Errorf("constructPod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.sb); diff != "" {
				t.Errorf("constructPod modified the sandbox (-before +after):\n%s", diff)
			}
		})
	}
}

func TestConstructPodHostnameNeedsDNSLabel(t *testing.T) {
	for name, want := range map[string]string{
		"ok-name":               "ok-name",
		"has.dots":              "",
		strings.Repeat("a", 63): strings.Repeat("a", 63),
		strings.Repeat("a", 64): "",
	} {
		sb := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Name = name })
		if got := constructPod(sb, testOwner).Spec.Hostname; got != want {
			t.Errorf("hostname for sandbox %q = %q, want %q", name, got, want)
		}
	}
}

func TestConstructPVC(t *testing.T) {
	tmpl := agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data",
			Labels: map[string]string{"tier": "fast"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{tmpl}
	})
	want := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-sb", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{testOwner},
			Labels:      map[string]string{"tier": "fast", agentsv1beta1.SandboxNameHashLabel: naming.NameHash("sb")},
			Annotations: map[string]string{"a": "b"}},
		Spec: tmpl.Spec,
	}
	if diff := cmp.Diff(want, constructPVC(sb, tmpl, testOwner)); diff != "" {
		t.Errorf("constructPVC (-want +got):\n%s", diff)
	}
	if _, ok := tmpl.Labels[agentsv1beta1.SandboxNameHashLabel]; ok {
		t.Errorf("constructPVC wrote into the template's labels")
	}
}

func TestConstructService(t *testing.T) {
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	})
	sel := map[string]string{agentsv1beta1.SandboxNameHashLabel: naming.NameHash("sb")}
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", Labels: sel, OwnerReferences: []metav1.OwnerReference{testOwner}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}
	if diff := cmp.Diff(want, constructService(sb, testOwner)); diff != "" {
		t.Errorf("constructService (-want +got):\n%s", diff)
	}
}

// A pool member starts locked; once a claim controls the Sandbox, a Pod made again for it (after
// a resume) serves that claim and starts unlocked, the claim's other env kept.
func TestConstructPodUnlocksClaimedSandboxes(t *testing.T) {
	locked := func(kind string) *agentsv1beta1.Sandbox {
		return sandbox(func(sb *agentsv1beta1.Sandbox) {
			sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: kind,
				Name: "owner", UID: "owner-uid", Controller: ptr.To(true)}}
			sb.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEEP", Value: "1"}}
			blueprint.LockUntilClaimed(&sb.Spec.PodTemplate.Spec)
		})
	}
	if !blueprint.LockedUntilClaimed(&constructPod(locked("SandboxWarmPool"), testOwner).Spec) {
		t.Errorf("the Pod of a pool member starts unlocked; want %s=true", sandboxd.RequireClaimEnv)
	}
	claimed := locked("SandboxClaim")
	pod := constructPod(claimed, testOwner)
	if blueprint.LockedUntilClaimed(&pod.Spec) {
		t.Errorf("the Pod of a claimed Sandbox starts locked (%s=true): nothing would unlock it", sandboxd.RequireClaimEnv)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "KEEP", Value: "1"}}, pod.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env of the claimed Sandbox's Pod (-want +got):\n%s", diff)
	}
	if !blueprint.LockedUntilClaimed(&claimed.Spec.PodTemplate.Spec) {
		t.Errorf("constructPod unlocked the Sandbox's own spec; it must only change the Pod")
	}
}

// podToCreate injects sandboxd only where the pod template asks; the installer gets no token and
// the container it starts keeps the tokens and the warm member's lock; a template the injection
// cannot honour is a terminal error.
func TestPodToCreate(t *testing.T) {
	const image = "registry.test/paddock/sandbox:v1"
	injected := func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{agentsv1beta1.InjectSandboxdAnnotation: "true"}
		sb.Spec.PodTemplate.Spec.Containers[0].Command = []string{"httpd", "-f"}
	}
	member := func(sb *agentsv1beta1.Sandbox) {
		sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool",
			Name: "pool", UID: "pool-uid", Controller: ptr.To(true)}}
		blueprint.LockUntilClaimed(&sb.Spec.PodTemplate.Spec)
	}
	type shape struct {
		InitContainers []string
		Command        []string
		Env            []string // names, container 0
		InitEnv        int
		Locked         bool
	}
	tests := []struct {
		name        string
		sb          *agentsv1beta1.Sandbox
		image       string
		credentials bool
		want        shape
		err         bool
	}{
		{"no annotation: the pod as constructed", sandbox(), image, true,
			shape{Env: []string{sandboxd.TokenEnv, sandboxd.ControlTokenEnv}}, false},
		{"annotation \"false\"", sandbox(func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{agentsv1beta1.InjectSandboxdAnnotation: "false"}
		}), image, false, shape{}, false},
		{"injected warm member: wrapped, locked, tokens in the container only", sandbox(injected, member), image, true,
			shape{InitContainers: []string{blueprint.SandboxdInstaller}, Command: []string{blueprint.InjectedSandboxd},
				Env: []string{sandboxd.RequireClaimEnv, sandboxd.TokenEnv, sandboxd.ControlTokenEnv}, Locked: true}, false},
		{"injected without credentials", sandbox(injected), image, false,
			shape{InitContainers: []string{blueprint.SandboxdInstaller}, Command: []string{blueprint.InjectedSandboxd}}, false},
		{"injection without an image", sandbox(injected), "", true, shape{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := podToCreate(tt.sb, testOwner, tt.image, nil, tt.credentials)
			if tt.err {
				if !errors.Is(err, blueprint.ErrSandboxdInjection) || !errors.Is(err, reconcile.TerminalError(nil)) {
					t.Fatalf("err %v, want a terminal ErrSandboxdInjection", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := pod.Spec.Containers[0]
			got := shape{Locked: blueprint.LockedUntilClaimed(&pod.Spec)}
			if !slices.Equal(c.Command, tt.sb.Spec.PodTemplate.Spec.Containers[0].Command) {
				got.Command = c.Command
			}
			for _, ic := range pod.Spec.InitContainers {
				got.InitContainers = append(got.InitContainers, ic.Name)
				got.InitEnv += len(ic.Env) + len(ic.EnvFrom)
			}
			for _, e := range c.Env {
				got.Env = append(got.Env, e.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
		})
	}
}
