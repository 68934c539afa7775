package devcluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/e2baccess"
)

// The E2B defaults of the dev cluster: pools named after the SDKs' default templates, in the
// default namespace, and one API key for that namespace.
const (
	e2bNamespace     = "default"
	e2bKeySecretName = "e2b-api-key-dev"
	e2bKeysNamespace = e2b.DefaultAPIKeyNamespace
)

// The pools size themselves between their bounds (docs/design/autosize.md), starting at their
// min. `base`: two ready members when quiet, and no more than a 2-core node starts and holds
// comfortably under gVisor. `code-interpreter-v1`: one, as each member's kernels hold Python's
// data stack in memory once used.
var (
	basePoolBounds        = poolBounds{min: 2, max: 8}
	interpreterPoolBounds = poolBounds{min: 1, max: 4}
)

type poolBounds struct{ min, max int32 }

// E2BTemplate is the `base` template: env-base (sandboxd with bash, Python, Node.js, git, curl and
// a C toolchain) as the only container, E2B's user home on a volume so files survive pause, and
// gVisor when the cluster has its RuntimeClass. The container may not gain privileges: the
// setuid binaries Debian's packages install (docs/environments.md) stay inert.
func E2BTemplate(image string, gvisor bool) *extensionsv1beta1.SandboxTemplate {
	return e2bTemplate(e2b.DefaultTemplate, image, gvisor)
}

// CodeInterpreterTemplate is the `code-interpreter-v1` template, @e2b/code-interpreter's
// default: E2BTemplate's shape with the code-interpreter image, and sandboxd serving the code
// interpreter on its E2B port, declared so the router reaches it.
func CodeInterpreterTemplate(image string, gvisor bool) *extensionsv1beta1.SandboxTemplate {
	t := e2bTemplate(e2b.InterpreterTemplate, image, gvisor)
	c := &t.Spec.PodTemplate.Spec.Containers[0]
	c.Args = append(c.Args, fmt.Sprintf("--interpreter-port=%d", e2b.InterpreterPort))
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "interpreter", ContainerPort: e2b.InterpreterPort})
	return t
}

func e2bTemplate(name, image string, gvisor bool) *extensionsv1beta1.SandboxTemplate {
	t := &extensionsv1beta1.SandboxTemplate{
		// sandboxd runtime: members start locked and are bound with the claim's settings, so a
		// create's envVars are served warm. Dev up configures snapshots, so pause keeps what
		// E2B's keeps: under gVisor the running processes and their memory (a checkpoint, which
		// holds gVisor's root filesystem overlay too), under runc the root filesystem; both keep
		// the home volume. A cluster without them suspends with the volume only and says so in
		// the Sandbox's MemoryKept or RootfsKept condition.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2bNamespace,
			Annotations: map[string]string{
				extensionsv1beta1.RuntimeAnnotation: extensionsv1beta1.RuntimeSandboxd,
				snapshotsv1alpha1.SuspendAnnotation: E2BSuspendMode(gvisor),
			}},
		Spec: extensionsv1beta1.SandboxTemplateSpec{
			EnvVarsInjectionPolicy: extensionsv1beta1.EnvVarsInjectionPolicyOverrides,
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
				// Members trust the egress CA, so that E2B network.rules, which give a member its
				// policy at claim time, add their headers over HTTPS too.
				PodTemplate: agentsv1beta1.PodTemplate{
					ObjectMeta: agentsv1beta1.PodMetadata{Annotations: map[string]string{egress.TrustCAAnnotation: "true"}},
					Spec: corev1.PodSpec{
						SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000),
							RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](1000)},
						Containers: []corev1.Container{{
							Name: "sandboxd", Image: image,
							Args:         []string{"--root-dir=/home/user", "--listen-host=0.0.0.0"},
							Ports:        []corev1.ContainerPort{{Name: "envd", ContainerPort: e2b.EnvdPort}, {Name: "rest", ContainerPort: 8080}},
							VolumeMounts: []corev1.VolumeMount{{Name: "home", MountPath: "/home/user"}},
							SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						}},
					}},
				VolumeClaimTemplates: []agentsv1beta1.PersistentVolumeClaimTemplate{{
					EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "home"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}},
			},
		},
	}
	if gvisor {
		t.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To(GVisorRuntimeClass)
	}
	return t
}

// E2BSuspendMode is what the E2B templates keep when a sandbox is paused: memory under gVisor,
// which alone can checkpoint a running sandbox, the root filesystem under runc.
func E2BSuspendMode(gvisor bool) string {
	if gvisor {
		return snapshotsv1alpha1.SuspendMemory
	}
	return snapshotsv1alpha1.SuspendRootfs
}

// E2BPool is the warm pool of E2BTemplate, under the SDK's default template name, sized from
// demand by the pool controller.
func E2BPool() *extensionsv1beta1.SandboxWarmPool {
	return e2bPool(e2b.DefaultTemplate, basePoolBounds)
}

// CodeInterpreterPool is the warm pool of CodeInterpreterTemplate, under @e2b/code-interpreter's
// default template name, sized from demand by the pool controller.
func CodeInterpreterPool() *extensionsv1beta1.SandboxWarmPool {
	return e2bPool(e2b.InterpreterTemplate, interpreterPoolBounds)
}

func e2bPool(name string, b poolBounds) *extensionsv1beta1.SandboxWarmPool {
	return &extensionsv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e2bNamespace, Annotations: map[string]string{
			extensionsv1beta1.AutosizeAnnotation:    "true",
			extensionsv1beta1.AutosizeMinAnnotation: strconv.Itoa(int(b.min)),
			extensionsv1beta1.AutosizeMaxAnnotation: strconv.Itoa(int(b.max)),
		}},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(b.min),
			TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: name}},
	}
}

// installE2B creates the `base` and `code-interpreter-v1` templates and pools and the dev API
// key when they are missing, and returns the three variables an E2B program exports, with the
// router's pod IP (reachable from the host over the node bridge).
func (cl *cluster) installE2B(ctx context.Context) (string, bool, error) {
	c, err := cl.e2bClient()
	if err != nil {
		return "", false, err
	}
	err = c.Get(ctx, client.ObjectKey{Name: GVisorRuntimeClass}, &nodev1.RuntimeClass{})
	gvisor := err == nil
	changed := false
	for _, obj := range []client.Object{E2BTemplate(cl.cfg.EnvBaseImage(), gvisor), E2BPool(),
		CodeInterpreterTemplate(cl.cfg.CodeInterpreterImage(), gvisor), CodeInterpreterPool()} {
		switch err := c.Create(ctx, obj); {
		case err == nil:
			changed = true
		case !apierrors.IsAlreadyExists(err):
			return "", false, fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	key, err := cl.e2bKey(ctx, c)
	if err != nil {
		return "", false, err
	}
	var url string
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for url == "" {
		if url, err = e2baccess.RouterURL(ctx, c, "paddock-system", e2b.DefaultPort); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", false, err
		case <-time.After(time.Second):
		}
	}
	cl.e2bExports = e2baccess.Exports(url, key)
	return fmt.Sprintf("pools %s/%s and %s/%s (gVisor %v), API key Secret %s/%s", e2bNamespace, e2b.DefaultTemplate, e2bNamespace, e2b.InterpreterTemplate, gvisor, e2bKeysNamespace, e2bKeySecretName), changed, nil
}

// e2bKey returns the dev API key, creating its Secret the first time.
func (cl *cluster) e2bKey(ctx context.Context, c client.Client) (string, error) {
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: e2bKeysNamespace, Name: e2bKeySecretName}, &s)
	if err == nil {
		return string(s.Data[e2b.APIKeyDataKey]), nil
	}
	if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the dev API key Secret: %w", err)
	}
	key, _, err := e2baccess.CreateNamedAPIKey(ctx, c, e2bKeysNamespace, e2bKeySecretName, e2bNamespace)
	return key, err
}

func (cl *cluster) e2bClient() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.cfg.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: s})
}
