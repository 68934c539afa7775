package helm

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

// TestServerSideApply applies what the chart renders, with every optional part but the
// ServiceMonitor on (the API server has no Prometheus Operator CRDs), the way
// `helm template | kubectl apply --server-side` does: the API server accepts every object, so
// no field is misspelt or misplaced.
func TestServerSideApply(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	objs := render(t, ns, "router.enabled=true", "router.authzMode=scoped-token", "tracing.enabled=true",
		"tracing.endpoint=collector:4317", "replicas=2", "nodeSelector.pool=system",
		"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "extraEnv[0].name=LOG_FORMAT", "extraEnv[0].value=json")
	for _, obj := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Errorf("server-side apply of %s: %v", key(obj), err)
		}
	}
	for _, obj := range objs {
		mustExist(ctx, t, obj)
	}
	// The cluster-scoped objects would stand in the way of the helm install below.
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			if err := env.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", key(obj), err)
			}
		}
	}
}

// TestInstallAndUninstall runs helm install and helm uninstall against the API server: install
// creates every object of the release, uninstall deletes them all and keeps the CRDs.
func TestInstallAndUninstall(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	kc := kubeconfig(t)
	const ns = "paddock-helm"
	// envtest runs no namespace controller, so a Namespace the release made would never finish
	// deleting (helm uninstall --wait would hang): the API-key namespace is made here instead.
	const keysNS = "paddock-helm-e2b"
	framework.MustCreate(t, ctx, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNS}})
	helmInstall(ctx, t, kc, "paddock", ns, "router.enabled=true", "router.authzMode=tokenreview",
		"router.e2b.apiKeyNamespace="+keysNS, "router.e2b.createApiKeyNamespace=false")
	manifest, err := framework.Helm(ctx, "get", "manifest", "paddock", "--kubeconfig", kc, "--namespace", ns)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 12 {
		t.Fatalf("helm get manifest lists %d objects, want the controller's and the router's (12 or more):\n%s", len(objs), manifest)
	}
	for _, obj := range objs {
		mustExist(ctx, t, obj)
	}

	if out, err := framework.Helm(ctx, "uninstall", "paddock", "--kubeconfig", kc, "--namespace", ns, "--wait"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, obj := range objs {
		framework.Eventually(t, func(ctx context.Context) error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GroupVersionKind())
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}, u)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil && u.GetDeletionTimestamp() != nil {
				return nil // only the garbage collector, which envtest does not run, would finish it
			}
			return fmt.Errorf("%s still exists after helm uninstall (get error: %v)", key(obj), err)
		})
	}
	var secrets corev1.SecretList
	if err := env.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("helm uninstall left %d release Secrets in %s", len(secrets.Items), ns)
	}
	// Helm never deletes CRDs; the Sandboxes they hold outlive the release.
	for _, name := range []string{"sandboxes.agents.x-k8s.io", "sandboxclaims.extensions.agents.x-k8s.io"} {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("CRD %s after helm uninstall: %v", name, err)
		}
	}
}

func mustExist(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}, u); err != nil {
		t.Errorf("%s is not on the API server: %v", key(obj), err)
	}
}

// kubeconfig writes a kubeconfig for the test's API server, for the helm binary.
func kubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData,
		ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
