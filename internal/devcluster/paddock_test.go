package devcluster

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
		Image, Pull, Host, Port, SandboxdImage string
		Replicas                               int32
	}
	got := map[string]deployment{}
	for _, file := range []string{"paddock.yaml", "paddock-router.yaml"} {
		objs, err := cl.bundle(file, images)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() != "Deployment" {
				continue
			}
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
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
			}
			got[d.Name] = dep
		}
	}
	apiPort := itoa(cfg.Ports.APIServer)
	want := map[string]deployment{
		"paddock-controller": {Image: cfg.ControllerImage(), Pull: "Always", Host: "198.18.255.1", Port: apiPort, Replicas: 1, SandboxdImage: cfg.SandboxImage()},
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
		for _, u := range objs {
			if u.GetKind() != "Deployment" {
				continue
			}
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
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
