// Package cli runs the paddock sandbox verbs in-process, as the binary assembles them, against a
// real API server with every controller running (--extensions); the test plays the kubelet.
package cli

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env, framework.StartControllers) }

// kubeconfig writes a kubeconfig for the test API server whose context's namespace is ns, so the
// commands find their namespace the way they would on a user's machine.
func kubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData,
		ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: ns}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// paddock runs the root command with args and returns what it printed.
func paddock(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return paddockIn(t, kubeconfig, strings.NewReader(""), args...)
}

// paddockIn is paddock with stdin.
func paddockIn(t *testing.T, kubeconfig string, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "paddock", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetIn(stdin)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err = root.ExecuteContext(framework.Context(t, framework.DefaultTimeout))
	return out.String(), errOut.String(), err
}

// mustPaddock is paddock for commands that must succeed.
func mustPaddock(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string) {
	t.Helper()
	return mustPaddockIn(t, kubeconfig, strings.NewReader(""), args...)
}

// mustPaddockIn is paddockIn for commands that must succeed.
func mustPaddockIn(t *testing.T, kubeconfig string, stdin io.Reader, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := paddockIn(t, kubeconfig, stdin, args...)
	if err != nil {
		t.Fatalf("paddock %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, stderr
}

// makePool creates template "tpl" (claims may set env) and pool "pool" with n replicas in ns.
func makePool(t *testing.T, ns string, n int32) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	tpl := builder.MakeTemplate("tpl", ns).EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyAllowed)
	framework.MustCreate(t, ctx, env.Client, tpl.Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(n).Obj())
}

func getClaim(ctx context.Context, ns, name string) (*extensionsv1beta1.SandboxClaim, error) {
	claim := &extensionsv1beta1.SandboxClaim{}
	return claim, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim)
}

func listClaims(t *testing.T, ns string) []extensionsv1beta1.SandboxClaim {
	t.Helper()
	list := &extensionsv1beta1.SandboxClaimList{}
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// field returns the column col of the table row whose first column is name.
func field(t *testing.T, table, name, col string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	header := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		cells := strings.Fields(l)
		if len(cells) != len(header) || cells[0] != name {
			continue
		}
		for i, h := range header {
			if h == col {
				return cells[i]
			}
		}
	}
	t.Fatalf("no column %s for row %s in table:\n%s", col, name, table)
	return ""
}
