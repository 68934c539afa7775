package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/dist"
	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

const (
	paddockNamespace = "paddock-system"
	controllerName   = "paddock-controller"
	helmRelease      = "paddock"
	// The dev install's field manager (internal/devcluster), used to put the bundle back.
	devFieldManager = "paddock-dev"
)

// testHelm swaps the bundle `paddock dev up` installed for the Helm chart with two replicas and
// leader election, proves a Sandbox becomes Ready through it and that leadership survives the
// leader's Pod, uninstalls the release and checks it left nothing but the CRDs. At the end the
// bundle is back, as dev up installed it.
func testHelm(t *testing.T) {
	ctx := framework.Context(t, 15*time.Minute)
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The controller image and the environment dev up gave the controller (the API server's
	// address, since the dev cluster runs no kube-proxy) are what the chart must run with too.
	live := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: paddockNamespace, Name: controllerName}, live); err != nil {
		t.Fatalf("the bundle's controller, installed by paddock dev up: %v", err)
	}
	devContainer := live.Spec.Template.Spec.Containers[0]
	t.Cleanup(func() { restoreBundle(t, c, devContainer) })

	uninstallBundle(t, ctx, c)
	values := map[string]any{
		"image":       map[string]any{"repository": repository(devContainer.Image), "tag": tag(devContainer.Image), "pullPolicy": "Always"},
		"replicas":    2,
		"extraEnv":    devContainer.Env,
		"leaderElect": true,
	}
	helm(t, ctx, "install", helmRelease, framework.ChartDir(), "--namespace", paddockNamespace, "--create-namespace",
		"--values", writeValues(t, values), "--wait", "--timeout", "5m")
	waitDeploymentAvailable(t, c, 2)

	t.Run("a Sandbox becomes Ready through the chart's controller", func(t *testing.T) {
		ns := namespace(t)
		sb := sleeper("helm-ready", ns)
		framework.MustCreate(t, ctx, c, sb)
		waitSandboxReady(t, c, sb)
	})
	t.Run("deleting the leader's Pod hands the Lease to the other replica; no Sandbox gets two Pods", func(t *testing.T) {
		testLeaderFailover(t, c)
	})

	helm(t, ctx, "uninstall", helmRelease, "--namespace", paddockNamespace, "--wait", "--timeout", "3m")
	expectReleaseGone(t, c)
}

// uninstallBundle runs `paddock uninstall --keep-crds` and waits for its namespace to be gone, so
// the chart can create it again.
func uninstallBundle(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	root := &cobra.Command{Use: "paddock", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"--kubeconfig", suite.kubeconfig, "uninstall", "--keep-crds"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("paddock uninstall --keep-crds: %v\n%s", err, out.String())
	}
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKey{Name: paddockNamespace}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("namespace %s still exists after paddock uninstall (get: %v)", paddockNamespace, err)
	})
}

// helm runs the helm binary against the cluster and fails the test on an error.
func helm(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := framework.Helm(ctx, append(args, "--kubeconfig", suite.kubeconfig)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func writeValues(t *testing.T, values map[string]any) string {
	t.Helper()
	data, err := sigsyaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir(): helm splits --values at commas, and the subtest's name has some.
	dir, err := os.MkdirTemp("", "paddock-e2e-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// repository and tag split an image reference such as 127.0.0.1:5001/paddock/controller:dev.
func repository(image string) string { r, _ := splitImage(image); return r }
func tag(image string) string        { _, t := splitImage(image); return t }

func splitImage(image string) (string, string) {
	slash := bytes.LastIndexByte([]byte(image), '/')
	colon := bytes.LastIndexByte([]byte(image), ':')
	if colon <= slash {
		return image, "latest"
	}
	return image[:colon], image[colon+1:]
}

// waitDeploymentAvailable waits for the controller Deployment to have replicas updated, Ready
// Pods.
func waitDeploymentAvailable(t *testing.T, c client.Client, replicas int32) {
	t.Helper()
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: paddockNamespace, Name: controllerName}, d); err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != replicas || s.AvailableReplicas != replicas || s.Replicas != replicas {
			return fmt.Errorf("deployment %s: %d replicas, %d updated, %d available; want %d of each", controllerName,
				s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, replicas)
		}
		return nil
	})
}

// expectReleaseGone checks helm uninstall deleted the release's objects and kept the CRDs, and
// with them the Sandboxes.
func expectReleaseGone(t *testing.T, c client.Client) {
	t.Helper()
	gone := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: paddockNamespace, Name: controllerName}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: paddockNamespace, Name: controllerName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: paddockNamespace, Name: controllerName + "-metrics"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: controllerName + "-extensions"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: paddockNamespace, Name: controllerName + "-leader-election"}},
	}
	for _, obj := range gone {
		framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("%T %s still exists after helm uninstall (get: %v)", obj, client.ObjectKeyFromObject(obj), err)
		})
	}
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(paddockNamespace), client.MatchingLabels{"app.kubernetes.io/name": controllerName}); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d controller Pods remain after helm uninstall", len(pods.Items))
		}
		return nil
	})
	secrets := &corev1.SecretList{}
	if err := c.List(context.Background(), secrets, client.InNamespace(paddockNamespace), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("helm uninstall left %d release Secrets", len(secrets.Items))
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "sandboxes.agents.x-k8s.io"}, crd); err != nil {
		t.Errorf("the Sandbox CRD after helm uninstall: %v (helm keeps CRDs)", err)
	}
}

// restoreBundle applies dist/paddock.yaml again with the controller container dev up ran, as
// `paddock dev up` installs it, and waits for the controller.
func restoreBundle(t *testing.T, c client.Client, container corev1.Container) {
	ctx := framework.Context(t, 5*time.Minute)
	objs, err := cli.ParseBundle(dist.Bundle)
	if err != nil {
		t.Error(err)
		return
	}
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" && obj.GetName() == controllerName {
			if obj, err = withContainer(obj, container); err != nil {
				t.Error(err)
				return
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(devFieldManager), client.ForceOwnership); err != nil {
			t.Errorf("restoring the bundle: applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	waitDeploymentAvailable(t, c, 1)
}

// withContainer puts the image, pull policy and environment of container on the bundle's
// controller Deployment.
func withContainer(u *unstructured.Unstructured, container corev1.Container) (*unstructured.Unstructured, error) {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
		return nil, err
	}
	bc := &d.Spec.Template.Spec.Containers[0]
	bc.Image, bc.ImagePullPolicy, bc.Env = container.Image, container.ImagePullPolicy, container.Env
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: m}
	out.SetAPIVersion("apps/v1")
	out.SetKind("Deployment")
	unstructured.RemoveNestedField(out.Object, "status")
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(out.Object, "spec", "template", "metadata", "creationTimestamp")
	return out, nil
}
