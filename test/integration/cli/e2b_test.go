package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/test/framework"
)

// `paddock e2b create-key` stores a key bound to the namespace of -n and prints the three
// variables, the key being the one the Secret holds.
func TestE2BCreateKey(t *testing.T) {
	ns, keys := env.Namespace(t), env.Namespace(t)
	out, _ := mustPaddock(t, kubeconfig(t, ns), "e2b", "create-key", "--keys-namespace", keys, "--api-url", "http://198.18.0.9:3000")
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		vars[k] = v
	}
	if vars["E2B_API_URL"] != "http://198.18.0.9:3000" || vars["E2B_SANDBOX_URL"] != vars["E2B_API_URL"] || !strings.HasPrefix(vars["E2B_API_KEY"], e2b.APIKeyPrefix) {
		t.Fatalf("output:\n%s", out)
	}
	var secrets corev1.SecretList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &secrets, client.InNamespace(keys),
		client.MatchingLabels{e2b.APIKeyNamespaceLabel: ns}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("API key Secrets in %s bound to %s: %d, %v; want 1", keys, ns, len(secrets.Items), err)
	}
	if got := string(secrets.Items[0].Data[e2b.APIKeyDataKey]); got != vars["E2B_API_KEY"] {
		t.Errorf("the Secret holds another key than the one printed")
	}
}
