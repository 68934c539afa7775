package devcluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/image"
)

// ControllerImage is paddock-controller's image in the dev registry.
func (c Config) ControllerImage() string { return c.RegistryHost() + "/paddock/controller:dev" }

// RouterImage is paddock-router's image in the dev registry.
func (c Config) RouterImage() string { return c.RegistryHost() + "/paddock/router:dev" }

// SnapshotCaptureImage is paddock-snapshot's image in the dev registry: the capture and resume
// Pods of SandboxSnapshots.
func (c Config) SnapshotCaptureImage() string { return c.RegistryHost() + "/paddock/snapshot:dev" }

// SnapshotRepository is where the dev cluster's SandboxSnapshots are pushed.
func (c Config) SnapshotRepository() string { return c.RegistryHost() + "/snapshots" }

// snapshotCaptureNamespace is config/snapshots' privileged namespace for capture Pods.
const snapshotCaptureNamespace = "paddock-snapshots"

// SandboxImage is the default sandbox image: sandboxd with a busybox shell.
func (c Config) SandboxImage() string { return c.RegistryHost() + "/paddock/sandbox:dev" }

// The images the bundles name; the dev install replaces them with the local registry's.
const (
	bundleImage       = "ghcr.io/paddock-dev/paddock-controller:dev"
	routerBundleImage = "ghcr.io/paddock-dev/paddock-router:dev"
	// sandboxBundleImage is the controller's --sandboxd-image: injected sandboxd comes from the
	// dev sandbox image.
	sandboxBundleImage = "ghcr.io/paddock-dev/paddock-sandbox:dev"
)

// bundleImages maps the images the bundles name to the local registry's.
func (c Config) bundleImages() map[string]string {
	return map[string]string{bundleImage: c.ControllerImage(), routerBundleImage: c.RouterImage(), sandboxBundleImage: c.SandboxImage()}
}

// fieldManager owns what the dev install applies.
const fieldManager = "paddock-dev"

// installPaddock builds the controller, router and sandbox images from the source tree, pushes
// them to the registry, applies dist/paddock.yaml (core and extensions) and
// dist/paddock-router.yaml with this cluster's images and API address, and waits for the
// controller and the router to be available.
func (cl *cluster) installPaddock(ctx context.Context) (string, bool, error) {
	uploaded, err := cl.pushPaddockImages(ctx)
	if err != nil {
		return "", false, err
	}
	if cl.cfg.GVisor {
		// Capture Pods mount runsc's state directory, which the shim makes only at its first
		// gVisor Pod.
		if err := os.MkdirAll(runscStateRoot, 0o711); err != nil {
			return "", false, err
		}
	}
	c, err := cl.applyClient()
	if err != nil {
		return "", false, err
	}
	reader, err := cl.registryReaderSecret()
	if err != nil {
		return "", false, err
	}
	for i, file := range cl.bundleFiles() {
		objs, err := cl.bundle(file, cl.cfg.bundleImages())
		if err != nil {
			return "", false, err
		}
		if i == 0 {
			// After the namespace, before the controller that mounts it.
			at := slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Namespace" }) + 1
			objs = slices.Insert(objs, at, reader)
		}
		for _, obj := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
				return "", false, fmt.Errorf("applying %s %s from dist/%s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}
	for _, name := range []string{"paddock-controller", "paddock-router"} {
		if err := waitAvailable(ctx, c, "paddock-system", name); err != nil {
			return "", false, err
		}
	}
	return fmt.Sprintf("controller %s and router %s available (profile %s); sandbox image %s", cl.cfg.ControllerImage(), cl.cfg.RouterImage(),
		cmp.Or(cl.profile, ProfileDefault), cl.cfg.SandboxImage()), uploaded, nil
}

// bundleFiles are the files under dist/ the install profile applies, in order.
func (cl *cluster) bundleFiles() []string {
	if cl.profile == ProfileUpstreamUnauthenticatedMigration {
		return []string{ProfileUpstreamUnauthenticatedMigration + ".yaml"}
	}
	return []string{"paddock.yaml", "paddock-router.yaml", snapshotsBundle}
}

// snapshotsBundle is the opt-in snapshot install, which the dev cluster's default profile applies.
const snapshotsBundle = "paddock-snapshots.yaml"

// pushPaddockImages builds paddock-controller, paddock-router and sandboxd as static binaries and
// pushes their images. Images are reproducible, so an unchanged tree uploads nothing.
func (cl *cluster) pushPaddockImages(ctx context.Context) (bool, error) {
	controllerBin, routerBin, sandboxdBin := cl.cfg.path("bin", "paddock-controller"), cl.cfg.path("bin", "paddock-router"), cl.cfg.path("bin", "sandboxd")
	snapshotBin := cl.cfg.path("bin", "paddock-snapshot")
	for pkg, out := range map[string]string{"./cmd/paddock-controller": controllerBin, "./cmd/paddock-router": routerBin, "./cmd/sandboxd": sandboxdBin, "./cmd/paddock-snapshot": snapshotBin} {
		if err := goBuild(ctx, cl.cfg.SourceDir, pkg, out); err != nil {
			return false, err
		}
	}
	controller, err := nonRootBinaryImage(controllerBin, "/paddock-controller")
	if err != nil {
		return false, err
	}
	router, err := nonRootBinaryImage(routerBin, "/paddock-router")
	if err != nil {
		return false, err
	}
	// The capture runs as root: it is privileged and talks to containerd and runsc.
	capture, err := image.FromTree(image.NewTree().AddFile("/paddock-snapshot", snapshotBin, 0o755), image.Config{Entrypoint: []string{"/paddock-snapshot"}})
	if err != nil {
		return false, err
	}
	tree, err := SandboxImageTree("", "", sandboxdBin)
	if err != nil {
		return false, err
	}
	sandbox, err := image.FromTree(tree, SandboxImageConfig)
	if err != nil {
		return false, err
	}
	uploaded := false
	for ref, img := range map[string]v1.Image{cl.cfg.ControllerImage(): controller, cl.cfg.RouterImage(): router, cl.cfg.SandboxImage(): sandbox, cl.cfg.SnapshotCaptureImage(): capture} {
		p, err := image.Push(ctx, img, ref)
		if err != nil {
			return false, fmt.Errorf("push %s: %w", ref, err)
		}
		uploaded = uploaded || p.Uploaded
	}
	return uploaded, nil
}

// nonRootBinaryImage is a scratch image holding one static binary, run as the nonroot user.
func nonRootBinaryImage(binary, entrypoint string) (v1.Image, error) {
	return image.FromTree(image.NewTree().AddFile(entrypoint, binary, 0o755),
		image.Config{Entrypoint: []string{entrypoint}, User: "65532:65532"})
}

// bundle reads one bundle under dist/ and adapts it to the dev cluster: images come from the
// local registry, and the Deployments reach the API server by the node address, because the dev
// cluster runs no kube-proxy to serve the kubernetes Service.
func (cl *cluster) bundle(file string, images map[string]string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(cl.cfg.SourceDir, "dist", file)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the install bundle: %w (run `make dist` in the source tree)", err)
	}
	for from, to := range images {
		data = bytes.ReplaceAll(data, []byte(from), []byte(to))
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "Deployment" {
			if err := cl.adaptDeployment(u); err != nil {
				return nil, err
			}
		}
		if u.GetKind() == "ConfigMap" && u.GetName() == "paddock-snapshots" {
			// The snapshot image policy's parameter: the controller's --snapshot-repository.
			if err := unstructured.SetNestedField(u.Object, cl.cfg.SnapshotRepository(), "data", "repository"); err != nil {
				return nil, err
			}
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// adaptDeployment points a bundle's Deployment at this cluster's API server, runs one replica
// that always pulls, and gives the router the authorization mode `--router-authz` chose and the
// dev cluster's E2B create timeout.
func (cl *cluster) adaptDeployment(u *unstructured.Unstructured) error {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		return err
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: cl.cfg.NodeIP.String()},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(cl.cfg.Ports.APIServer)},
	)
	// The image is pushed under the same tag on every change; always pull so a restart runs it.
	c.ImagePullPolicy = corev1.PullAlways
	// One real node: a second replica would only take CPU from the tests.
	d.Spec.Replicas = ptr.To[int32](1)
	if d.Name == "paddock-controller" {
		// Sandboxes resolve through the internet stand-in: the public resolvers of the default
		// are unreachable from this machine's pods, on purpose.
		setArg(c, "--sandbox-nameservers=", cl.cfg.InternetResolver().String())
		if slices.Contains(cl.bundleFiles(), snapshotsBundle) {
			cl.snapshotArgs(c)
		}
		// paddock-egress runs on the node (egress.go): the default policy admits its ports.
		setArg(c, "--sandbox-egress-proxy-ports=", fmt.Sprintf("%d,%d", egressProxyPort, egressDNSPort))
		cl.registryReaderArgs(&d.Spec.Template.Spec, c)
	}
	if d.Name == "paddock-router" {
		if cl.routerAuthz != "" {
			setArg(c, "--authz-mode=", cl.routerAuthz)
		}
		// One small node starts every cold sandbox: dozens created at once queue on its CPU for
		// longer than the production default of 60 s. A client that sets no longer request
		// timeout still gives up at its own 60 s, as against any install.
		setArg(c, "--e2b-create-timeout=", DevE2BCreateTimeout.String())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return err
	}
	u.Object = m
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	return nil
}

// snapshotArgs configures SandboxSnapshots (dist/paddock-snapshots.yaml is applied too): images
// go to the dev registry, capture Pods run paddock-snapshot from it in the privileged namespace
// and reach this node's containerd, whose socket and root live in the state dir, and, with
// gVisor, the runsc the shim runs and its state.
func (cl *cluster) snapshotArgs(c *corev1.Container) {
	nodePaths := []string{cl.cfg.path("containerd")}
	if cl.cfg.GVisor && cl.bin.GVisorDir != "" {
		nodePaths = append(nodePaths, runscStateRoot)
		setArg(c, "--snapshot-runsc=", filepath.Join(cl.bin.GVisorDir, "runsc"))
	}
	setArg(c, "--snapshot-repository=", cl.cfg.SnapshotRepository())
	setArg(c, "--snapshot-capture-image=", cl.cfg.SnapshotCaptureImage())
	setArg(c, "--snapshot-insecure-registry=", "true")
	setArg(c, "--snapshot-capture-namespace=", snapshotCaptureNamespace)
	setArg(c, "--snapshot-containerd-socket=", cl.cfg.ContainerdSocket())
	setArg(c, "--snapshot-node-paths=", strings.Join(nodePaths, ","))
}

// rolledOut reports whether d runs its current template only, all of it available: an up that
// changed the install (another profile, a new image) must not go on while old Pods still serve.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas >= want
}

// DevE2BCreateTimeout is the dev router's --e2b-create-timeout.
const DevE2BCreateTimeout = 3 * time.Minute

// setArg sets the container argument with prefix (for example "--authz-mode=") to value,
// appending it when the container has none.
func setArg(c *corev1.Container, prefix, value string) {
	for i, arg := range c.Args {
		if strings.HasPrefix(arg, prefix) {
			c.Args[i] = prefix + value
			return
		}
	}
	c.Args = append(c.Args, prefix+value)
}

func (cl *cluster) applyClient() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.cfg.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := appsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// waitAvailable polls the Deployment until it is available, for at most three minutes, and
// says what the Deployment reports if it never is.
func waitAvailable(ctx context.Context, c client.Client, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	d := &appsv1.Deployment{}
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
		if err == nil && rolledOut(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			var conds []string
			for _, cond := range d.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s (%s)", cond.Type, cond.Status, cond.Message))
			}
			return fmt.Errorf("deployment %s/%s not available in time (get error: %v; conditions: %s); see `kubectl -n %s logs deploy/%s`",
				ns, name, err, strings.Join(conds, "; "), ns, name)
		case <-time.After(time.Second):
		}
	}
}

// registryReaderSecretName is the Secret holding the registry reader address's credentials in
// the controller's namespace, mounted at registryReaderDir.
const (
	registryReaderSecretName = "paddock-dev-registry-reader"
	registryReaderDir        = "/etc/paddock/registry-reader"
)

// registryReaderSecret is the docker config with the registry reader address's credentials.
func (cl *cluster) registryReaderSecret() (*unstructured.Unstructured, error) {
	password, err := ReaderPassword(cl.cfg.RegistryReaderPasswordFile())
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{cl.cfg.RegistryReaderHost(): map[string]string{
		"username": RegistryReaderUser, "password": password}}})
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registryReaderSecretName, Namespace: "paddock-system"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(secret)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	return u, nil
}

// registryReaderArgs has the controller read the configs of images in the dev registry, which
// the node pulls at 127.0.0.1 and the controller's Pod cannot reach there, from the registry's
// reader address, with its credentials (docs/byo-image.md).
func (cl *cluster) registryReaderArgs(spec *corev1.PodSpec, c *corev1.Container) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "registry-reader", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: registryReaderSecretName}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "registry-reader", MountPath: registryReaderDir, ReadOnly: true})
	setArg(c, "--image-config-registry-mirror=", cl.cfg.RegistryHost()+"=http://"+cl.cfg.RegistryReaderHost())
	setArg(c, "--image-config-registry-mirror-credentials=", registryReaderDir+"/"+corev1.DockerConfigJsonKey)
}
