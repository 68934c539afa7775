package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	routerserver "github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// TestExecAndCopyThroughTheRouter: exec and cp with --router-url reach the sandbox through a real
// router in its default mode (TokenReview with the per-sandbox access check), carrying the token
// of an identity granted sandboxes/proxy on that sandbox from --router-token-file or
// $PADDOCK_ROUTER_TOKEN. Without a token, or with one of an identity granted nothing, the router
// refuses them and the error says which credential to send.
func TestExecAndCopyThroughTheRouter(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	var ls server.Listeners
	claim := claimOnLoopback(t, ns, kc, "agent", loopbackPort{"legacy", &ls.Legacy}, loopbackPort{"rest", &ls.REST})
	legacy, rest := portOf(ls.Legacy), portOf(ls.REST)
	root := sandboxdtest.ServeWithToken(t, ls, sandboxToken(t, ns, "agent"))
	url, granted := routerAsInstalled(t, ns, claim)
	nobody := framework.ServiceAccountToken(t, env.Config, ns, "nobody")
	tokenFile := func(token string) string {
		p := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	through := []string{"--router-url", url, "--runtime-port", strconv.Itoa(legacy)}
	exec := func(extra ...string) (string, error) {
		args := append(append([]string{"exec", "agent"}, through...), extra...)
		stdout, _, err := paddock(t, kc, append(args, "--", "sh", "-c", "echo routed")...)
		return stdout, err
	}

	framework.Eventually(t, func(context.Context) error { // the router's cache sees the claimed Sandbox
		_, err := exec("--router-token-file", tokenFile(granted))
		return err
	})
	if stdout, err := exec("--router-token-file", tokenFile(granted)); err != nil || stdout != "routed\n" {
		t.Errorf("exec through the router with a granted token: %q, %v", stdout, err)
	}
	t.Setenv(cli.RouterTokenEnv, granted)
	if stdout, err := exec(); err != nil || stdout != "routed\n" {
		t.Errorf("exec through the router with $%s: %q, %v", cli.RouterTokenEnv, stdout, err)
	}
	writeFile(t, filepath.Join(root, "result.txt"), []byte("42\n"), 0o644)
	stdout, _ := mustPaddock(t, kc, "cp", "--router-url", url, "--rest-port", strconv.Itoa(rest), "agent:result.txt", "-")
	if stdout != "42\n" {
		t.Errorf("cp through the router printed %q, want the file", stdout)
	}

	t.Setenv(cli.RouterTokenEnv, "")
	for name, tc := range map[string]struct {
		extra   []string
		wantErr string
	}{
		"no token":             {nil, "give --router-token-file or $" + cli.RouterTokenEnv},
		"a token granted none": {[]string{"--router-token-file", tokenFile(nobody)}, "grant the token's identity create on sandboxes/proxy"},
		"an empty token file":  {[]string{"--router-token-file", tokenFile("")}, "is empty"},
	} {
		if _, err := exec(tc.extra...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: exec = %v, want an error containing %q", name, err, tc.wantErr)
		}
	}
	if _, _, err := paddock(t, kc, "exec", "agent", "--router-token-file", tokenFile(granted), "--", "true"); err == nil ||
		!strings.Contains(err.Error(), "give --router-url too") {
		t.Errorf("--router-token-file without --router-url: %v, want an error naming --router-url", err)
	}
}

// loopbackPort is a port the test's sandboxd serves on loopback: the template declares it by
// name, and l receives its listener.
type loopbackPort struct {
	name string
	l    *net.Listener
}

// claimOnLoopback listens on loopback for each port, creates a template declaring them (the
// router dials only ports a sandbox declares) and a pool of one, claims name from the pool with
// `paddock claim` and returns the claim. The play kubelet gives the sandbox 127.0.0.1, where the
// test then serves sandboxd on the listeners.
func claimOnLoopback(t *testing.T, ns, kc, name string, ports ...loopbackPort) *extensionsv1beta1.SandboxClaim {
	t.Helper()
	env.PlayKubelet(t, ns, "127.0.0.1")
	ctx := framework.Context(t, framework.DefaultTimeout)
	tpl := builder.MakeTemplate("tpl", ns)
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		*p.l = l
		tpl = tpl.Port(p.name, int32(portOf(l)))
	}
	framework.MustCreate(t, ctx, env.Client, tpl.Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())
	mustPaddock(t, kc, "claim", "--pool", "pool", "--name", name)
	claim, err := getClaim(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

func portOf(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// routerAsInstalled serves a real router in its default mode for namespace ns (TokenReview, the
// per-sandbox access check, the sandbox's own token injected) and returns its proxy URL and the
// token of an identity granted sandboxes/proxy on the claim's sandbox.
func routerAsInstalled(t *testing.T, ns string, claim *extensionsv1beta1.SandboxClaim) (url, granted string) {
	t.Helper()
	cfg := framework.RouterConfig(t, env.Config)
	cfg.AuthzMode = router.AuthzTokenReview
	cfg.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	cfg.InjectSandboxToken, cfg.SandboxTokenSource, cfg.SandboxNamespaces = true, router.TokensFromSandboxSecrets, []string{ns}
	r, _ := framework.ServeRouter(t, cfg)
	return "http://" + r.Addr(routerserver.ProxyHTTP),
		framework.ServiceAccountToken(t, env.Config, ns, claim.Name+"-runner", claim.Status.Sandbox.Name)
}
