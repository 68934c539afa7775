package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/internal/router/proxy"
)

func TestParseValidation(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "no proxy listener", args: []string{"--http-bind-address="}, wantErr: "set at least one"},
		{name: "https without cert", args: []string{"--https-bind-address=:8443"}, wantErr: "needs --tls-cert-file"},
		{name: "mtls without ca", args: []string{"--mtls-mode=required"}, wantErr: "needs --https-bind-address and --tls-client-ca-file"},
		{name: "bad mtls mode", args: []string{"--mtls-mode=maybe"}, wantErr: `--mtls-mode="maybe"`},
		{name: "zero proxy timeout", args: []string{"--proxy-timeout=0s"}, wantErr: "--proxy-timeout=0s must be positive"},
		{name: "negative body limit", args: []string{"--max-request-body-bytes=-1"}, wantErr: "--max-request-body-bytes=-1"},
		{name: "tiny header limit", args: []string{"--max-header-bytes=10"}, wantErr: "--max-header-bytes=10"},
		{name: "scoped without key file", args: []string{"--authz-mode=scoped-token"}, wantErr: "needs --authz-scoped-token-secret-file"},
		{name: "unknown mode", args: []string{"--authz-mode=open"}, wantErr: `--authz-mode="open"`},
		{name: "the loopback escape hatch is no flag", args: []string{"--allow-loopback-pod-ip"}, wantErr: "flag provided but not defined"},
		{name: "positional", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "tokenreview without a token", args: []string{"--authz-tokenreview-require-token=false"}, wantErr: "tokenreview always authenticates"},
		{name: "dns routing needs the opt-in", args: []string{"--sandbox-cache=false", "--inject-sandbox-token=false"}, wantErr: "add --insecure-dns-routing"},
		{name: "dns routing opted in", args: []string{"--sandbox-cache=false", "--insecure-dns-routing", "--inject-sandbox-token=false"}},
		{name: "token injection needs the cache", args: []string{"--sandbox-cache=false", "--insecure-dns-routing"}, wantErr: "--inject-sandbox-token needs --sandbox-cache=true"},
		{name: "bad credentials secret", args: []string{"--credentials-secret=just-a-name"}, wantErr: `--credentials-secret="just-a-name" is not namespace/name`},
		{name: "tokens from sandbox secrets need namespaces", args: []string{"--sandbox-token-source=sandbox-secrets"}, wantErr: "needs --sandbox-namespaces"},
		{name: "tokens from sandbox secrets and E2B", args: []string{"--sandbox-token-source=sandbox-secrets", "--sandbox-namespaces=team-a", "--e2b-bind-address=:3000"}, wantErr: "need --sandbox-token-source=key"},
		{name: "tokens from sandbox secrets in one namespace", args: []string{"--sandbox-token-source=sandbox-secrets", "--sandbox-namespaces=team-a", "--credentials-secret=ignored"}},
		{name: "unknown token source", args: []string{"--sandbox-token-source=env"}, wantErr: `--sandbox-token-source="env"`},
		{name: "allow-all is an explicit opt-in", args: []string{"--authz-mode=allow-all"}},
		{name: "client Pod labels", args: []string{"--unauthenticated-client-pod-labels=paddock.dev/sandbox-client=true"}},
		{name: "client Pod labels not k=v", args: []string{"--unauthenticated-client-pod-labels=a b"}, wantErr: "--unauthenticated-client-pod-labels=\"a b\" is not k=v"},
		{name: "client Pod labels with allow-all", args: []string{"--unauthenticated-client-pod-labels=a=b", "--authz-mode=allow-all"}, wantErr: "has no effect with --authz-mode=allow-all"},
		{name: "no idle upstream connections", args: []string{"--upstream-max-idle-conns-per-host=0"}, wantErr: "--upstream-max-idle-conns-per-host=0 must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(file, []byte("proxy-timeout: 20s\ncluster-domain: from.file\nupstream-max-retries: 5\naccess-log: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLUSTER_DOMAIN", "from.env")
	t.Setenv("PROXY_TIMEOUT_SECONDS", "7.5")
	o, err := parse([]string{"--config", file, "--proxy-timeout=40s"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.ProxyTimeout, o.ClusterDomain, o.Retries, o.AccessLog}
	want := []any{40 * time.Second, "from.file", 5, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flag > file > env (-want +got):\n%s", diff)
	}

	t.Setenv("SANDBOX_ROUTER_CONFIG", "")
	o, err = parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{7500 * time.Millisecond, "from.env"}, []any{o.ProxyTimeout, o.ClusterDomain}); diff != "" {
		t.Errorf("env over default (-want +got):\n%s", diff)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, content, wantErr string }{
		{name: "unknown key", content: "allow-loopback-pod-ip: true\n", wantErr: `"allow-loopback-pod-ip" is not a flag`},
		{name: "nested", content: "cluster-domain:\n  a: b\n", wantErr: "must be a scalar"},
		{name: "not a map", content: "- a\n", wantErr: "not a YAML map"},
		{name: "bad value", content: "proxy-timeout: soon\n", wantErr: `"proxy-timeout"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := parse([]string{"--config=" + file})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestManifestArgs keeps config/router in step with the flags: the shipped arguments must parse.
func TestManifestArgs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "router", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatalf("config/router/deployment.yaml: %v", err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 {
		t.Fatal("no arguments in config/router/deployment.yaml")
	}
	if _, err := parse(args); err != nil {
		t.Errorf("config/router/deployment.yaml arguments do not parse: %v", err)
	}
	// The components patch argument 9 in place; it must stay the authorization mode.
	if !strings.HasPrefix(args[9], "--authz-mode=") {
		t.Errorf("argument 9 is %q; components/*/kustomization.yaml replace it as --authz-mode", args[9])
	}
}

// TestDefaultsFailClosed pins the secure defaults: authenticated and authorized per sandbox,
// resolved through the Sandbox cache, with the sandbox's own token sent upstream.
func TestDefaultsFailClosed(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "paddock-system")
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.Config()
	got := []any{cfg.AuthzMode, !cfg.TokenReview.SkipAccessCheck, cfg.SandboxCache, cfg.InsecureDNSRouting, cfg.InjectSandboxToken, cfg.CredentialsSecret.String()}
	want := []any{"tokenreview", true, true, false, true, "paddock-system/paddock-credentials-key"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestTracingFollowsTheOTLPEnvironmentUnlessTheFlagIsGiven(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	got := map[string]bool{}
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	got["no endpoint"] = o.EnableTracing
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "127.0.0.1:4317")
	if o, err = parse(nil); err != nil {
		t.Fatal(err)
	}
	got["endpoint"] = o.EnableTracing
	if o, err = parse([]string{"--enable-tracing=false"}); err != nil {
		t.Fatal(err)
	}
	got["endpoint, flag false"] = o.EnableTracing
	want := map[string]bool{"no endpoint": false, "endpoint": true, "endpoint, flag false": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EnableTracing (-want +got):\n%s", diff)
	}
}

func TestUpstreamIdleConnsPerHostReachesTheTransport(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, proxy.DefaultIdleConnsPerHost}, {[]string{"--upstream-max-idle-conns-per-host=200"}, 200}} {
		o, err := parse(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		cfg := o.Config()
		tr := proxy.NewTransport(cfg.Policy, cfg.DialTimeout, cfg.ResponseTimeout, cfg.UpstreamIdleConnsPerHost)
		if tr.MaxIdleConnsPerHost != tc.want || tr.MaxIdleConns < tc.want {
			t.Errorf("%v: transport keeps %d idle connections per sandbox (%d in all), want %d", tc.args, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.want)
		}
	}
}

// TestPortForwardIsRefusedOnHostNetwork: the port-forward is accepted by default, but not when
// the downward API says the Pod shares the node's network (its loopback is the node's).
func TestPortForwardIsRefusedOnHostNetwork(t *testing.T) {
	cases := []struct {
		name, podIP, hostIP string
		args                []string
		wantErr             string
	}{
		{name: "own network namespace", podIP: "198.18.1.5", hostIP: "198.18.0.2"},
		{name: "outside a Pod (no downward API)"},
		{name: "hostNetwork", podIP: "198.18.0.2", hostIP: "198.18.0.2", wantErr: "--accept-port-forward with hostNetwork"},
		{name: "hostNetwork with the flag off", podIP: "198.18.0.2", hostIP: "198.18.0.2", args: []string{"--accept-port-forward=false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_IP", tc.podIP)
			t.Setenv("HOST_IP", tc.hostIP)
			o, err := parse(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := len(tc.args) == 0; o.Config().AcceptPortForward != want {
					t.Errorf("AcceptPortForward = %v, want %v", o.Config().AcceptPortForward, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
