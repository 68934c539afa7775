package blueprint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

// The layout of an injected sandboxd (docs/byo-image.md).
const (
	// SandboxdInstaller is the init container that copies sandboxd out of the controller's
	// --sandboxd-image.
	SandboxdInstaller = "paddock-install-sandboxd"
	// SandboxdVolume is the emptyDir it copies into, mounted read-only at SandboxdDir in the
	// container sandboxd starts.
	SandboxdVolume = "paddock-sandboxd"
	SandboxdDir    = "/paddock"
	// InjectedSandboxd is the copy's path.
	InjectedSandboxd = SandboxdDir + "/sandboxd"
	// WorkspaceVolume is the emptyDir mounted at the sandbox root when the container mounts
	// nothing there: an image's own directories are rarely writable by the sandbox's user.
	WorkspaceVolume = "paddock-workspace"
)

// ErrSandboxdInjection means the pod template asks for sandboxd injection in a way that cannot
// be honoured; the Sandbox controller reports it as reason InjectionInvalid.
var ErrSandboxdInjection = errors.New("cannot inject sandboxd")

// InjectsSandboxd reports whether a pod template asks for sandboxd injection
// (InjectSandboxdAnnotation).
func InjectsSandboxd(md agentsv1beta1.PodMetadata) bool {
	return md.Annotations[agentsv1beta1.InjectSandboxdAnnotation] == "true"
}

// NeedsImageProcess reports whether a pod template asks for sandboxd injection and gives its
// first container no command: sandboxd replaces the image's entrypoint, so what the image runs
// must be read from its config (RunImageProcess) for it to keep running.
func NeedsImageProcess(md agentsv1beta1.PodMetadata, spec *corev1.PodSpec) bool {
	return InjectsSandboxd(md) && len(spec.Containers) > 0 && len(spec.Containers[0].Command) == 0
}

// RunImageProcess gives the first container of spec, when it has no command, the command the
// container runtime would run without sandboxd, from the image config's entrypoint and cmd: the
// entrypoint with the container's args, or the cmd when it has none; with no entrypoint, the args
// or the cmd alone. InjectSandboxd then starts that as the service sandboxd supervises.
func RunImageProcess(spec *corev1.PodSpec, entrypoint, cmd []string) {
	if len(spec.Containers) == 0 || len(spec.Containers[0].Command) > 0 {
		return
	}
	c := &spec.Containers[0]
	args := c.Args
	if len(args) == 0 {
		args = cmd
	}
	if len(entrypoint) == 0 {
		c.Command, c.Args = slices.Clone(args), nil
		return
	}
	c.Command, c.Args = slices.Clone(entrypoint), slices.Clone(args)
}

// sandboxdPorts are the listeners an injected sandboxd serves, with the variable that moves each.
var sandboxdPorts = []struct {
	name, env string
	port      int32
}{
	{"sandboxd-rest", sandboxd.RESTPortEnv, sandboxd.RESTPort},
	{"sandboxd-grpc", sandboxd.GRPCPortEnv, sandboxd.GRPCPort},
	{"sandboxd-legacy", sandboxd.LegacyPortEnv, sandboxd.LegacyPort},
	{"sandboxd-envd", sandboxd.EnvdPortEnv, sandboxd.EnvdPort},
}

// InjectSandboxd starts the first container of spec through a sandboxd that an init container
// copies from image into a volume the container mounts read-only. The container's command and
// args become the service sandboxd supervises (none without a command); sandboxd's ports are
// declared so the router may reach them, its health is the readiness probe unless the container
// has one, and the sandbox root gets an emptyDir unless the container mounts a volume there.
// The init container gets no token: the controller gives the tokens to regular containers only.
func InjectSandboxd(spec *corev1.PodSpec, image string) error {
	if err := CheckInjection(spec, image); err != nil {
		return err
	}
	c := &spec.Containers[0]
	if len(c.Command) == 0 && len(c.Args) > 0 {
		return fmt.Errorf("%w: container %q sets args but no command, and with sandboxd injected the image's entrypoint does not run; set command to the image's entrypoint",
			ErrSandboxdInjection, c.Name)
	}
	rootDir := envValue(c, sandboxd.RootDirEnv, sandboxd.DefaultRootDir)
	needWorkspace := !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == rootDir })

	spec.InitContainers = append([]corev1.Container{installer(image)}, spec.InitContainers...)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: SandboxdVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: SandboxdVolume, MountPath: SandboxdDir, ReadOnly: true})
	if needWorkspace {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: WorkspaceVolume, MountPath: rootDir})
	}

	args := []string{"--preflight"}
	if p := c.TerminationMessagePath; p != "" && p != corev1.TerminationMessagePathDefault {
		args = append(args, "--termination-message-path="+p)
	}
	if len(c.Command) > 0 {
		args = append(append(append(args, "--"), c.Command...), c.Args...)
	}
	c.Command, c.Args = []string{InjectedSandboxd}, args

	DeclareSandboxdPorts(spec)
	if c.ReadinessProbe == nil {
		if rest := envPort(c, sandboxd.RESTPortEnv, sandboxd.RESTPort); rest != 0 {
			c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/v1/health", Port: intstr.FromInt32(rest)}}}
		}
	}
	return nil
}

// CheckInjection reports what keeps InjectSandboxd from injecting into spec whatever its first
// container's command (no --sandboxd-image, no container, a name or path the injection needs),
// so that the controller refuses such a template before it reads anything from a registry.
func CheckInjection(spec *corev1.PodSpec, image string) error {
	if image == "" {
		return fmt.Errorf("%w: the controller runs without --sandboxd-image; set it (Helm value sandboxdImage) to an image holding sandboxd at %s, or use an image that runs sandboxd itself",
			ErrSandboxdInjection, sandboxd.BinaryPath)
	}
	if len(spec.Containers) == 0 {
		return fmt.Errorf("%w: the pod template has no container", ErrSandboxdInjection)
	}
	c := &spec.Containers[0]
	rootDir := envValue(c, sandboxd.RootDirEnv, sandboxd.DefaultRootDir)
	needWorkspace := !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == rootDir })
	return injectionConflicts(spec, c, needWorkspace)
}

// installer is the init container that copies sandboxd: the restricted Pod Security profile's
// settings, whatever the pod's, so it passes any namespace's admission.
func installer(image string) corev1.Container {
	return corev1.Container{
		Name:         SandboxdInstaller,
		Image:        image,
		Command:      []string{sandboxd.BinaryPath, "--install-to=" + InjectedSandboxd},
		VolumeMounts: []corev1.VolumeMount{{Name: SandboxdVolume, MountPath: SandboxdDir}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](65532),
			RunAsGroup:               ptr.To[int64](65532),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// injectionConflicts refuses a template that already uses a name or path the injection needs.
func injectionConflicts(spec *corev1.PodSpec, c *corev1.Container, needWorkspace bool) error {
	names := []string{SandboxdVolume}
	if needWorkspace {
		names = append(names, WorkspaceVolume)
	}
	for _, v := range spec.Volumes {
		if slices.Contains(names, v.Name) {
			return fmt.Errorf("%w: the pod template has a volume named %q, which the injected sandboxd needs; rename it", ErrSandboxdInjection, v.Name)
		}
	}
	for _, ic := range spec.InitContainers {
		if ic.Name == SandboxdInstaller {
			return fmt.Errorf("%w: the pod template has an init container named %q, which the injected sandboxd needs; rename it", ErrSandboxdInjection, ic.Name)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == SandboxdDir {
			return fmt.Errorf("%w: container %q mounts a volume at %s, where the injected sandboxd goes; mount it elsewhere", ErrSandboxdInjection, c.Name, SandboxdDir)
		}
	}
	return nil
}

// DeclareSandboxdPorts declares on the first container the ports an injected sandboxd listens on
// that it does not declare yet. The router, the E2B front door and the idle controller dial only
// ports a Sandbox's spec declares, so the Sandboxes made from an injected template declare them
// (withSandboxdPorts), and so does the Pod. A name another container of the Pod uses is left off.
func DeclareSandboxdPorts(spec *corev1.PodSpec) {
	if len(spec.Containers) == 0 {
		return
	}
	c := &spec.Containers[0]
	taken := map[string]bool{}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, other := range cs {
			for _, p := range other.Ports {
				taken[p.Name] = true
			}
		}
	}
	for _, sp := range sandboxdPorts {
		port := envPort(c, sp.env, sp.port)
		if port == 0 || slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }) {
			continue
		}
		p := corev1.ContainerPort{ContainerPort: port, Protocol: corev1.ProtocolTCP}
		if !taken[sp.name] {
			p.Name = sp.name
		}
		c.Ports = append(c.Ports, p)
	}
}

// withSandboxdPorts declares sandboxd's ports in a pod spec made from tpl when tpl asks for
// injection.
func withSandboxdPorts(tpl *extensionsv1beta1.SandboxTemplate, spec *corev1.PodSpec) {
	if InjectsSandboxd(tpl.Spec.PodTemplate.ObjectMeta) {
		DeclareSandboxdPorts(spec)
	}
}

// envValue is the literal value of the container's variable name, def when unset.
func envValue(c *corev1.Container, name, def string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value
		}
	}
	return def
}

// envPort is the port the container's variable name sets, def when it sets none it can parse.
func envPort(c *corev1.Container, name string, def int32) int32 {
	n, err := strconv.ParseInt(envValue(c, name, ""), 10, 32)
	if err != nil || n < 0 || n > 65535 {
		return def
	}
	return int32(n)
}
