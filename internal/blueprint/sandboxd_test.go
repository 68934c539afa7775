package blueprint

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

const sandboxdImage = "registry.test/paddock/sandbox:v1"

func webApp() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.test/web:1",
		Command: []string{"httpd", "-f"}, Args: []string{"-p", "8000"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
	}}}
}

// injectedPorts are sandboxd's four ports as InjectSandboxd declares them.
func injectedPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{
		{Name: "sandboxd-rest", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "sandboxd-grpc", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
		{Name: "sandboxd-legacy", ContainerPort: 8888, Protocol: corev1.ProtocolTCP},
		{Name: "sandboxd-envd", ContainerPort: 49983, Protocol: corev1.ProtocolTCP},
	}
}

func healthProbe(port int32) *corev1.Probe {
	return &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v1/health", Port: intstr.FromInt32(port)}}}
}

// The whole rewrite of the usual case: a web app whose command becomes sandboxd's service.
func TestInjectSandboxdIntoAWebApp(t *testing.T) {
	got := webApp()
	if err := InjectSandboxd(&got, sandboxdImage); err != nil {
		t.Fatal(err)
	}
	want := corev1.PodSpec{
		InitContainers: []corev1.Container{{
			Name: SandboxdInstaller, Image: sandboxdImage,
			Command:      []string{sandboxd.BinaryPath, "--install-to=/paddock/sandboxd"},
			VolumeMounts: []corev1.VolumeMount{{Name: SandboxdVolume, MountPath: "/paddock"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
				AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		}},
		Containers: []corev1.Container{{
			Name: "app", Image: "registry.test/web:1",
			Command: []string{"/paddock/sandboxd"},
			Args:    []string{"--preflight", "--", "httpd", "-f", "-p", "8000"},
			Ports:   append([]corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}, injectedPorts()...),
			VolumeMounts: []corev1.VolumeMount{
				{Name: SandboxdVolume, MountPath: "/paddock", ReadOnly: true},
				{Name: WorkspaceVolume, MountPath: "/workspace"},
			},
			ReadinessProbe: healthProbe(8080),
		}},
		Volumes: []corev1.Volume{
			{Name: SandboxdVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
			{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod spec (-want +got):\n%s", diff)
	}
}

// What each setting of the container changes in the rewrite, and what is refused.
func TestInjectSandboxd(t *testing.T) {
	type result struct {
		Args       []string
		Ports      []int32
		PortNames  []string
		Mounts     []string // name=path
		ProbePort  int32
		InitFirst  string
		VolumeSize int
	}
	observe := func(s corev1.PodSpec) result {
		c := s.Containers[0]
		r := result{Args: c.Args, InitFirst: s.InitContainers[0].Name, VolumeSize: len(s.Volumes)}
		for _, p := range c.Ports {
			r.Ports, r.PortNames = append(r.Ports, p.ContainerPort), append(r.PortNames, p.Name)
		}
		for _, m := range c.VolumeMounts {
			r.Mounts = append(r.Mounts, m.Name+"="+m.MountPath)
		}
		if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
			r.ProbePort = c.ReadinessProbe.HTTPGet.Port.IntVal
		}
		return r
	}
	allPorts := []int32{8080, 9090, 8888, 49983}
	allNames := []string{"sandboxd-rest", "sandboxd-grpc", "sandboxd-legacy", "sandboxd-envd"}
	bothMounts := []string{"paddock-sandboxd=/paddock", "paddock-workspace=/workspace"}
	tests := []struct {
		name  string
		image string
		edit  func(*corev1.PodSpec)
		want  result
		err   string
	}{
		{"no command: sandboxd alone", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].Command, s.Containers[0].Args, s.Containers[0].Ports = nil, nil, nil
		},
			result{Args: []string{"--preflight"}, Ports: allPorts, PortNames: allNames, Mounts: bothMounts, ProbePort: 8080, InitFirst: SandboxdInstaller, VolumeSize: 2}, ""},
		{"a volume at the sandbox root is kept", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].Ports = nil
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/workspace"}}
			s.Volumes = []corev1.Volume{{Name: "data"}}
		}, result{Args: []string{"--preflight", "--", "httpd", "-f", "-p", "8000"}, Ports: allPorts, PortNames: allNames,
			Mounts: []string{"data=/workspace", "paddock-sandboxd=/paddock"}, ProbePort: 8080, InitFirst: SandboxdInstaller, VolumeSize: 2}, ""},
		{"SANDBOXD_ROOT_DIR moves the workspace; ports moved or off by env; a declared port is not repeated", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9090}}
			s.Containers[0].Env = []corev1.EnvVar{{Name: sandboxd.RootDirEnv, Value: "/home/user"}, {Name: sandboxd.RESTPortEnv, Value: "7000"},
				{Name: sandboxd.LegacyPortEnv, Value: "0"}}
		}, result{Args: []string{"--preflight", "--", "httpd", "-f", "-p", "8000"}, Ports: []int32{9090, 7000, 49983},
			PortNames: []string{"grpc", "sandboxd-rest", "sandboxd-envd"}, Mounts: []string{"paddock-sandboxd=/paddock", "paddock-workspace=/home/user"},
			ProbePort: 7000, InitFirst: SandboxdInstaller, VolumeSize: 2}, ""},
		{"the container's readiness probe, termination message path and init containers stay", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].Ports = nil
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8000)}}}
			s.Containers[0].TerminationMessagePath = "/tmp/why"
			s.InitContainers = []corev1.Container{{Name: "setup", Image: "x"}}
		}, result{Args: []string{"--preflight", "--termination-message-path=/tmp/why", "--", "httpd", "-f", "-p", "8000"}, Ports: allPorts,
			PortNames: allNames, Mounts: bothMounts, ProbePort: 8000, InitFirst: SandboxdInstaller, VolumeSize: 2}, ""},
		{"a port name another container uses is left off", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].Ports = nil
			s.Containers = append(s.Containers, corev1.Container{Name: "side", Ports: []corev1.ContainerPort{{Name: "sandboxd-envd", ContainerPort: 1}}})
		}, result{Args: []string{"--preflight", "--", "httpd", "-f", "-p", "8000"}, Ports: allPorts,
			PortNames: []string{"sandboxd-rest", "sandboxd-grpc", "sandboxd-legacy", ""}, Mounts: bothMounts, ProbePort: 8080, InitFirst: SandboxdInstaller, VolumeSize: 2}, ""},
		{"args without a command", sandboxdImage, func(s *corev1.PodSpec) { s.Containers[0].Command = nil }, result{},
			`container "app" sets args but no command`},
		{"no --sandboxd-image", "", nil, result{}, "the controller runs without --sandboxd-image"},
		{"a volume of the injection's name", sandboxdImage, func(s *corev1.PodSpec) { s.Volumes = []corev1.Volume{{Name: SandboxdVolume}} }, result{},
			`a volume named "paddock-sandboxd"`},
		{"a mount where sandboxd goes", sandboxdImage, func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "x", MountPath: "/paddock"}}
		}, result{}, "mounts a volume at /paddock"},
		{"an init container of the installer's name", sandboxdImage, func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: SandboxdInstaller}}
		}, result{}, `an init container named "paddock-install-sandboxd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := webApp()
			if tt.edit != nil {
				tt.edit(&spec)
			}
			before := spec.DeepCopy()
			err := InjectSandboxd(&spec, tt.image)
			if tt.err != "" {
				if !errors.Is(err, ErrSandboxdInjection) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrSandboxdInjection saying %q", err, tt.err)
				}
				if diff := cmp.Diff(before, &spec); diff != "" {
					t.Errorf("a refused injection changed the spec (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, observe(spec)); diff != "" {
				t.Errorf("rewrite (-want +got):\n%s", diff)
			}
		})
	}
}

// A template whose pod template asks for injection runs sandboxd: its members start locked, and
// its members and cold Sandboxes declare sandboxd's ports, which the router and the E2B front door
// read from the Sandbox; such a member of an unchanged template is not stale.
func TestSandboxesOfAnInjectedTemplate(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	tpl := template()
	tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{agentsv1beta1.InjectSandboxdAnnotation: "false"}
	if plain := PoolMember(pool, tpl, PoolOptions{}); RunsSandboxd(tpl) || LockedUntilClaimed(&plain.Spec.PodTemplate.Spec) || len(plain.Spec.PodTemplate.Spec.Containers[0].Ports) != 0 {
		t.Fatalf(`a template with inject-sandboxd "false" runs sandboxd: %+v`, plain.Spec.PodTemplate.Spec.Containers[0])
	}
	tpl.Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.InjectSandboxdAnnotation] = "true"
	member := PoolMember(pool, tpl, PoolOptions{})
	if !RunsSandboxd(tpl) || !LockedUntilClaimed(&member.Spec.PodTemplate.Spec) || !InjectsSandboxd(member.Spec.PodTemplate.ObjectMeta) {
		t.Errorf("member of an injected template: locked %v, injects sandboxd %v; want both",
			LockedUntilClaimed(&member.Spec.PodTemplate.Spec), InjectsSandboxd(member.Spec.PodTemplate.ObjectMeta))
	}
	cold, err := ColdSandbox(claim(), tpl)
	if err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*agentsv1beta1.Sandbox{"member": member, "cold Sandbox": cold} {
		if diff := cmp.Diff(injectedPorts(), sb.Spec.PodTemplate.Spec.Containers[0].Ports); diff != "" {
			t.Errorf("%s ports (-want +got):\n%s", name, diff)
		}
	}
	if len(tpl.Spec.PodTemplate.Spec.Containers[0].Ports) != 0 {
		t.Error("the template itself was changed")
	}
	member.Labels[agentsv1beta1.SandboxTemplateHashLabel] = "old" // force the slow path
	if Stale(tpl, member) {
		t.Error("a member of an unchanged injected template is stale")
	}
}

// RunImageProcess gives a container without a command what the container runtime would run: the
// image's entrypoint with the container's args or the image's cmd, or without an entrypoint the
// args or the cmd alone; a container with a command keeps it.
func TestRunImageProcess(t *testing.T) {
	entrypoint, cmd := []string{"/docker-entrypoint.sh"}, []string{"nginx", "-g", "daemon off;"}
	for _, tc := range []struct {
		name                 string
		command, args        []string
		entrypoint, imageCmd []string
		wantCommand, wantArg []string
	}{
		{"entrypoint and cmd", nil, nil, entrypoint, cmd, entrypoint, cmd},
		{"args replace cmd", nil, []string{"nginx", "-T"}, entrypoint, cmd, entrypoint, []string{"nginx", "-T"}},
		{"cmd alone", nil, nil, nil, cmd, cmd, nil},
		{"args alone", nil, []string{"python3", "-m", "http.server"}, nil, cmd, []string{"python3", "-m", "http.server"}, nil},
		{"entrypoint alone", nil, nil, entrypoint, nil, entrypoint, nil},
		{"nothing to run", nil, nil, nil, nil, nil, nil},
		{"the template's command", []string{"httpd"}, []string{"-f"}, entrypoint, cmd, []string{"httpd"}, []string{"-f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Command: tc.command, Args: tc.args}}}
			RunImageProcess(&spec, tc.entrypoint, tc.imageCmd)
			c := spec.Containers[0]
			if diff := cmp.Diff([][]string{tc.wantCommand, tc.wantArg}, [][]string{c.Command, c.Args}); diff != "" {
				t.Errorf("command and args (-want +got):\n%s", diff)
			}
		})
	}
	if NeedsImageProcess(agentsv1beta1.PodMetadata{}, &corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}) {
		t.Error("a template without injection needs the image's process")
	}
	injected := agentsv1beta1.PodMetadata{Annotations: map[string]string{agentsv1beta1.InjectSandboxdAnnotation: "true"}}
	if !NeedsImageProcess(injected, &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Args: []string{"-x"}}}}) {
		t.Error("an injected container with args but no command does not need the image's process")
	}
	web := webApp()
	if NeedsImageProcess(injected, &web) {
		t.Error("an injected container with a command needs the image's process")
	}
}
