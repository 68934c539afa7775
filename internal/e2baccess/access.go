// Package e2baccess gives a person or a program access to a cluster's E2B front door: it mints an
// API key Secret the router picks up, finds a Ready router's address, and renders the variables
// an E2B program reads. The CLI, the dev cluster, the benchmark and tests share it.
package e2baccess

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
)

// routerPodLabel selects paddock-router's Pods in the install bundles, with routerPodLabelValue.
const (
	routerPodLabel      = "app.kubernetes.io/name"
	routerPodLabelValue = "paddock-router"
)

// CreateAPIKey stores a fresh API key bound to namespace in a new Secret in keysNamespace and
// returns the key. The router picks it up from its watch; no restart is needed.
func CreateAPIKey(ctx context.Context, c client.Client, keysNamespace, namespace string) (string, *corev1.Secret, error) {
	return CreateNamedAPIKey(ctx, c, keysNamespace, "", namespace)
}

// CreateNamedAPIKey is CreateAPIKey with the Secret's name given; "" generates one.
func CreateNamedAPIKey(ctx context.Context, c client.Client, keysNamespace, name, namespace string) (string, *corev1.Secret, error) {
	key, err := e2b.NewAPIKey()
	if err != nil {
		return "", nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: keysNamespace,
			Labels: map[string]string{e2b.APIKeyNamespaceLabel: namespace}},
		Data: map[string][]byte{e2b.APIKeyDataKey: []byte(key)},
	}
	if name == "" {
		s.GenerateName = "e2b-api-key-"
	}
	if err := c.Create(ctx, s); err != nil {
		return "", nil, fmt.Errorf("creating the API key Secret in namespace %q (the router's --e2b-api-key-namespace): %w", keysNamespace, err)
	}
	return key, s, nil
}

// RouterURL is http://<pod IP>:<port> of a Ready paddock-router Pod in namespace: an address
// reachable from wherever pod IPs are (in the cluster, and from the host of `paddock dev`).
func RouterURL(ctx context.Context, c client.Client, namespace string, port int) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{routerPodLabel: routerPodLabelValue}); err != nil {
		return "", fmt.Errorf("listing paddock-router Pods in namespace %q: %w", namespace, err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), nil
			}
		}
	}
	return "", fmt.Errorf("no Ready paddock-router Pod in namespace %q; pass the router's address with --api-url", namespace)
}

// Exports renders the three variables an E2B program needs, as shell export lines.
func Exports(apiURL, key string) string {
	return fmt.Sprintf("export E2B_API_URL=%s\nexport E2B_SANDBOX_URL=%s\nexport E2B_API_KEY=%s\n", apiURL, apiURL, key)
}
