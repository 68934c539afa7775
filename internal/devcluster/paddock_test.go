package devcluster

import (
	"encoding/base64"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestBundlesRunOnTheDevCluster checks what the dev install changes in the committed bundles:
// both Deployments run the local registry's image, always pulled, one replica, and reach the
// API server by the node address; injected sandboxd comes from the local sandbox image.
func TestBundlesRunOnTheDevCluster(t *testing.T) {
	cfg := testCfg
	cfg.SourceDir = filepath.Join("..", "..")
	cl := &cluster{cfg: cfg}
	images := cfg.bundleImages()
	type deployment struct {
		Image, Pull, Host, Port, SandboxdImage, Nameservers, EgressPorts string
		Replicas                                                         int32
	}
	got := map[string]deployment{}
	for _, file := range []string{"paddock.yaml", "paddock-router.yaml"} {
		objs, err := cl.bundle(file, images)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments(t, objs) {
			c := d.Spec.Template.Spec.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			dep := deployment{Image: c.Image, Pull: string(c.ImagePullPolicy), Host: env["KUBERNETES_SERVICE_HOST"],
				Port: env["KUBERNETES_SERVICE_PORT"], Replicas: *d.Spec.Replicas}
			for _, arg := range c.Args {
				if v, ok := strings.CutPrefix(arg, "--sandboxd-image="); ok {
					dep.SandboxdImage = v
				}
				if v, ok := strings.CutPrefix(arg, "--sandbox-nameservers="); ok {
					dep.Nameservers = v
				}
				if v, ok := strings.CutPrefix(arg, "--sandbox-egress-proxy-ports="); ok {
					dep.EgressPorts = v
				}
			}
			got[d.Name] = dep
		}
	}
	apiPort := itoa(cfg.Ports.APIServer)
	want := map[string]deployment{
		"paddock-controller": {Image: cfg.ControllerImage(), Pull: "Always", Host: "198.18.255.1", Port: apiPort, Replicas: 1, SandboxdImage: cfg.SandboxImage(), Nameservers: "198.19.64.53", EgressPorts: "15001,15053"},
		"paddock-router":     {Image: cfg.RouterImage(), Pull: "Always", Host: "198.18.255.1", Port: apiPort, Replicas: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployments as installed on the dev cluster (-want +got):\n%s", diff)
	}
}

// TestRouterAuthzReachesTheRouter: the committed bundle is fail-closed, --router-authz replaces
// the router's mode and nothing else's, and the dev router waits longer for cold E2B creates.
func TestRouterAuthzReachesTheRouter(t *testing.T) {
	got := map[string][]string{}
	for _, mode := range []string{"", RouterAuthzAllowAll} {
		cfg := testCfg
		cfg.SourceDir = filepath.Join("..", "..")
		cl := &cluster{cfg: cfg, routerAuthz: mode}
		objs, err := cl.bundle("paddock-router.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments(t, objs) {
			for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(arg, "--authz-mode=") || strings.HasPrefix(arg, "--e2b-create-timeout=") {
					got[mode] = append(got[mode], arg)
				}
			}
		}
	}
	want := map[string][]string{"": {"--authz-mode=tokenreview", "--e2b-create-timeout=3m0s"},
		RouterAuthzAllowAll: {"--authz-mode=allow-all", "--e2b-create-timeout=3m0s"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("router --authz-mode by --router-authz (-want +got):\n%s", diff)
	}
}

// TestMigrationProfileInstallsItsBundle: --profile=upstream-unauthenticated-migration applies
// the profile's one bundle, whose controller and router carry its flags after the dev cluster's
// adaptations; the default applies the two default bundles.
func TestMigrationProfileInstallsItsBundle(t *testing.T) {
	cfg := testCfg
	cfg.SourceDir = filepath.Join("..", "..")
	if got := (&cluster{cfg: cfg}).bundleFiles(); !slices.Equal(got, []string{"paddock.yaml", "paddock-router.yaml", "paddock-snapshots.yaml"}) {
		t.Errorf("default profile applies %v", got)
	}
	cl := &cluster{cfg: cfg, profile: ProfileUpstreamUnauthenticatedMigration}
	files := cl.bundleFiles()
	if len(files) != 1 {
		t.Fatalf("migration profile applies %v, want its one bundle", files)
	}
	objs, err := cl.bundle(files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"paddock-controller": "--sandboxd-allow-unauthenticated-network=true", "paddock-router": "--unauthenticated-client-pod-labels=paddock.dev/sandbox-client=true"}
	for _, d := range deployments(t, objs) {
		if flag, ok := want[d.Name]; ok && slices.Contains(d.Spec.Template.Spec.Containers[0].Args, flag) {
			delete(want, d.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("deployments lacking the profile's flags: %v", want)
	}
}

// TestSnapshotsConfigured: the default profile's controller pushes snapshots to the dev registry
// from capture Pods in the privileged namespace, with this node's containerd paths and, with
// gVisor, its runsc; the image policy's parameter names the same repository. The migration
// profile, which applies no snapshot bundle, gets no snapshot flags.
func TestSnapshotsConfigured(t *testing.T) {
	cfg := testCfg
	cfg.SourceDir = filepath.Join("..", "..")
	cfg.GVisor = true
	cl := &cluster{cfg: cfg}
	cl.bin.GVisorDir = "/cache/gvisor"
	objs, err := cl.bundle("paddock.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range deployments(t, objs) {
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(arg, "--snapshot-") {
				got = append(got, arg)
			}
		}
	}
	want := []string{"--snapshot-runsc=/cache/gvisor/runsc", "--snapshot-repository=" + cfg.SnapshotRepository(), "--snapshot-capture-image=" + cfg.SnapshotCaptureImage(),
		"--snapshot-insecure-registry=true", "--snapshot-capture-namespace=paddock-snapshots", "--snapshot-containerd-socket=" + cfg.ContainerdSocket(),
		"--snapshot-node-paths=" + cfg.path("containerd") + "," + runscStateRoot}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("controller snapshot flags (-want +got):\n%s", diff)
	}
	objs, err = cl.bundle(snapshotsBundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	repo := ""
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && u.GetName() == "paddock-snapshots" {
			repo, _, _ = unstructured.NestedString(u.Object, "data", "repository")
		}
	}
	if repo != cfg.SnapshotRepository() {
		t.Errorf("image policy repository %q, want %q", repo, cfg.SnapshotRepository())
	}
	migration := &cluster{cfg: cfg, profile: ProfileUpstreamUnauthenticatedMigration}
	objs, err = migration.bundle(ProfileUpstreamUnauthenticatedMigration+".yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments(t, objs) {
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(arg, "--snapshot-") {
				t.Errorf("migration profile's %s has %s", d.Name, arg)
			}
		}
	}
}

// deployments are the Deployments among a bundle's objects.
func deployments(t *testing.T, objs []*unstructured.Unstructured) []*appsv1.Deployment {
	t.Helper()
	var out []*appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestRolledOutWaitsForTheNewPods: a Deployment whose new template has not replaced every old Pod
// is not ready for the next step, though it is available.
func TestRolledOutWaitsForTheNewPods(t *testing.T) {
	d := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}}
	}
	for name, tc := range map[string]struct {
		d    *appsv1.Deployment
		want bool
	}{
		"rolled out":                            {d(2, 2, 1, 1, 1), true},
		"new spec not observed":                 {d(3, 2, 1, 1, 1), false},
		"old Pod still available, new starting": {d(2, 2, 2, 1, 1), false},
		"new Pod not available yet":             {d(2, 2, 1, 1, 0), false},
	} {
		if got := rolledOut(tc.d); got != tc.want {
			t.Errorf("%s: rolledOut = %v, want %v", name, got, tc.want)
		}
	}
}

// TestRegistryReaderConfigured: the controller reads the dev registry's image configs from its
// reader address with the credentials of the Secret it mounts, under either profile.
func TestRegistryReaderConfigured(t *testing.T) {
	cfg := testCfg
	cfg.SourceDir = filepath.Join("..", "..")
	cfg.StateDir = t.TempDir()
	for _, cl := range []*cluster{{cfg: cfg}, {cfg: cfg, profile: ProfileUpstreamUnauthenticatedMigration}} {
		objs, err := cl.bundle(cl.bundleFiles()[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments(t, objs) {
			if d.Name != "paddock-controller" {
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			var got []string
			for _, arg := range c.Args {
				if strings.HasPrefix(arg, "--image-config-") {
					got = append(got, arg)
				}
			}
			want := []string{"--image-config-registry-mirror=" + cfg.RegistryHost() + "=http://" + cfg.RegistryReaderHost(),
				"--image-config-registry-mirror-credentials=" + registryReaderDir + "/.dockerconfigjson"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("profile %q: controller flags (-want +got):\n%s", cl.profile, diff)
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == registryReaderDir && m.ReadOnly }) ||
				!slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
					return v.Secret != nil && v.Secret.SecretName == registryReaderSecretName
				}) {
				t.Errorf("profile %q: the controller does not mount Secret %s read-only at %s", cl.profile, registryReaderSecretName, registryReaderDir)
			}
		}
	}
	cl := &cluster{cfg: cfg}
	u, err := cl.registryReaderSecret()
	if err != nil {
		t.Fatal(err)
	}
	password, err := ReaderPassword(cfg.RegistryReaderPasswordFile())
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedString(u.Object, "data", ".dockerconfigjson")
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || !strings.Contains(string(raw), `"`+cfg.RegistryReaderHost()+`"`) || !strings.Contains(string(raw), `"password":"`+password+`"`) ||
		u.GetNamespace() != "paddock-system" || u.GetKind() != "Secret" {
		t.Errorf("reader Secret %s/%s: %s, %v", u.GetNamespace(), u.GetName(), raw, err)
	}
}
