// Package uninstall runs `paddock uninstall` in-process against a real API server on which the
// install bundle was applied the way `kubectl apply --server-side` applies it. It has its own API
// server because it deletes the CRDs every other integration test needs. No controller runs: the
// bundle's Deployment never starts in envtest, and uninstall does not need it to.
package uninstall

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/dist"
	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

// TestUninstall walks one cluster through the whole life of an uninstall: refused while a Sandbox
// and a template exist, --keep-crds, --force, then a run with nothing left to do.
func TestUninstall(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	bundle, err := cli.ParseBundle(dist.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	router, err := cli.ParseBundle(dist.RouterBundle)
	if err != nil {
		t.Fatal(err)
	}
	bundle = append(bundle, router...) // the router's install goes too
	snapshots, err := cli.ParseBundle(dist.SnapshotsBundle)
	if err != nil {
		t.Fatal(err)
	}
	bundle = append(bundle, snapshots...) // and the opt-in snapshot install
	egress, err := cli.ParseBundle(dist.EgressBundle)
	if err != nil {
		t.Fatal(err)
	}
	bundle = append(bundle, egress...) // and the opt-in egress install, whose node chains outlive it
	for _, obj := range bundle {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("server-side apply of %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	ns := env.Namespace(t)
	framework.MustCreate(t, ctx, env.Client, builder.MakeSandbox("keep-me", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	kc := kubeconfig(t)
	crds, rest := split(bundle)

	stdout, err := paddock(t, kc, "uninstall")
	want := "refusing to uninstall: 1 Sandbox, 1 SandboxTemplate would be deleted with their CRDs; delete them first or pass --force"
	if err == nil || err.Error() != want {
		t.Fatalf("uninstall with a Sandbox: err = %v, want %q\nstdout:\n%s", err, want, stdout)
	}
	for _, row := range []string{"Sandbox          " + ns + "  keep-me", "SandboxTemplate  " + ns + "  tpl"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("refusal output lacks row %q:\n%s", row, stdout)
		}
	}
	mustExist(t, bundle...) // the refusal deleted nothing
	mustExistUser(t, ns)

	stdout = mustPaddock(t, kc, "uninstall", "--keep-crds")
	t.Logf("uninstall --keep-crds:\n%s", stdout)
	if !strings.Contains(stdout, "keeping 1 Sandbox, 1 SandboxTemplate with their CRDs (--keep-crds)") ||
		!strings.Contains(stdout, "kept the CRDs") ||
		!strings.Contains(stdout, "deleted Deployment paddock-system/paddock-controller") ||
		!strings.Contains(stdout, "deleted DaemonSet paddock-egress/paddock-egress") ||
		!strings.Contains(stdout, "paddock-egress --cleanup") {
		t.Errorf("uninstall --keep-crds output lacks the kept summary, the Deployment's or the egress DaemonSet's deletion, or how to remove the egress chains:\n%s", stdout)
	}
	mustBeGone(t, rest...)
	mustExist(t, crds...)
	mustExistUser(t, ns)

	stdout = mustPaddock(t, kc, "uninstall", "--force")
	t.Logf("uninstall --force:\n%s", stdout)
	if strings.Contains(stdout, "paddock-egress --cleanup") {
		t.Errorf("uninstall --force speaks of egress chains though paddock-egress was already gone:\n%s", stdout)
	}
	if !strings.Contains(stdout, "deleting 1 Sandbox, 1 SandboxTemplate with their CRDs (--force)") ||
		!strings.Contains(stdout, "deleted CustomResourceDefinition sandboxes.agents.x-k8s.io") {
		t.Errorf("uninstall --force output lacks the summary or the CRD's deletion:\n%s", stdout)
	}
	mustBeGone(t, bundle...)
	mustBeGone(t, userSandbox(ns)) // deleted with its CRD

	stdout = mustPaddock(t, kc, "uninstall")
	if !strings.Contains(stdout, "nothing to do") {
		t.Errorf("second uninstall: want nothing to do, got:\n%s", stdout)
	}
}

func split(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// get reads obj's live state with a client of its own, whose REST mapping is fresh.
func get(t *testing.T, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	return live, c.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKeyFromObject(obj), live)
}

func mustExist(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		live, err := get(t, o)
		if err != nil {
			t.Errorf("%s %s: %v, want it to exist", o.GetKind(), o.GetName(), err)
		} else if live.GetDeletionTimestamp() != nil {
			t.Errorf("%s %s is being deleted, want it kept", o.GetKind(), o.GetName())
		}
	}
}

// mustBeGone checks every object is deleted. envtest runs no namespace controller, so a deleted
// Namespace stays Terminating; being deleted is as gone as it gets there.
func mustBeGone(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		live, err := get(t, o)
		if err == nil && (o.GetKind() != "Namespace" || live.GetDeletionTimestamp() == nil) {
			t.Errorf("%s %s still exists after uninstall", o.GetKind(), o.GetName())
		}
	}
}

// userSandbox names the Sandbox the test creates, for get: its kind may no longer be served.
func userSandbox(ns string) *unstructured.Unstructured {
	sb := &unstructured.Unstructured{}
	sb.SetAPIVersion("agents.x-k8s.io/v1beta1")
	sb.SetKind("Sandbox")
	sb.SetNamespace(ns)
	sb.SetName("keep-me")
	return sb
}

func mustExistUser(t *testing.T, ns string) {
	t.Helper()
	mustExist(t, userSandbox(ns))
}

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

// paddock runs the root command, as cmd/paddock assembles it, and returns its stdout.
func paddock(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "paddock", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := root.ExecuteContext(framework.Context(t, framework.DefaultTimeout))
	return out.String(), err
}

func mustPaddock(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := paddock(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("paddock %s: %v\noutput:\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
