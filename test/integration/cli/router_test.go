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
	env.PlayKubelet(t, ns, "127.0.0.1") // the test's sandboxd listens on loopback
	var ls server.Listeners
	for _, l := range []*net.Listener{&ls.Legacy, &ls.REST} {
		var err error
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	legacy, rest := ls.Legacy.Addr().(*net.TCPAddr).Port, ls.REST.Addr().(*net.TCPAddr).Port
	ctx := framework.Context(t, framework.DefaultTimeout)
	// The router dials only ports the sandbox declares.
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Port("legacy", int32(legacy)).Port("rest", int32(rest)).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())
	mustPaddock(t, kc, "claim", "--pool", "pool", "--name", "agent")
	claim, err := getClaim(ctx, ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	root := sandboxdtest.ServeWithToken(t, ls, sandboxToken(t, ns, "agent"))

	// The router as installed: TokenReview, the access check, the sandbox's own token injected.
	cfg := framework.RouterConfig(t, env.Config)
	cfg.AuthzMode = router.AuthzTokenReview
	cfg.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	cfg.InjectSandboxToken, cfg.SandboxTokenSource, cfg.SandboxNamespaces = true, router.TokensFromSandboxSecrets, []string{ns}
	r, _ := framework.ServeRouter(t, cfg)
	url := "http://" + r.Addr(routerserver.ProxyHTTP)

	granted := framework.ServiceAccountToken(t, env.Config, ns, "agent-runner", claim.Status.Sandbox.Name)
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
