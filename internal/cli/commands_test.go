package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestRouterToken: the router's credential comes from --router-token-file, then
// $PADDOCK_ROUTER_TOKEN, then the kubeconfig user's token (inline or file); none without
// --router-url, where the CLI goes straight to the pod with the sandbox's own token.
func TestRouterToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagFile, kubeFile, empty := write("flag", "from-flag\n"), write("kube", " from-kubeconfig-file \n"), write("empty", "\n")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == RouterTokenEnv {
				return v
			}
			return ""
		}
	}
	const url = "http://router:8080"
	for _, tc := range []struct {
		name    string
		g       Globals
		cfg     rest.Config
		env     string
		want    string
		wantErr string
	}{
		{name: "flag first", g: Globals{RouterURL: url, RouterTokenFile: flagFile}, env: "from-env", cfg: rest.Config{BearerToken: "kube"}, want: "from-flag"},
		{name: "then the environment", g: Globals{RouterURL: url}, env: "from-env", cfg: rest.Config{BearerToken: "kube"}, want: "from-env"},
		{name: "then the kubeconfig's token", g: Globals{RouterURL: url}, cfg: rest.Config{BearerToken: "kube"}, want: "kube"},
		{name: "or its token file", g: Globals{RouterURL: url}, cfg: rest.Config{BearerTokenFile: kubeFile}, want: "from-kubeconfig-file"},
		{name: "none: an allow-all router needs none", g: Globals{RouterURL: url}},
		{name: "straight to the pod: never the user's token", g: Globals{}, env: "from-env", cfg: rest.Config{BearerToken: "kube"}},
		{name: "an empty file", g: Globals{RouterURL: url, RouterTokenFile: empty}, wantErr: "is empty"},
		{name: "a missing file", g: Globals{RouterURL: url, RouterTokenFile: filepath.Join(dir, "nope")}, wantErr: "--router-token-file"},
		{name: "a file without a router", g: Globals{RouterTokenFile: flagFile}, wantErr: "give --router-url too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.g.routerToken(&tc.cfg, env(tc.env))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("routerToken = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
			case err != nil || got != tc.want:
				t.Errorf("routerToken = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
