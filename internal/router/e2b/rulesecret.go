package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// ruleSecretPrefix starts the name of every Secret holding a claim's E2B rules header values.
// The front door deletes only Secrets so named, and a fresh name per create or network update
// means it never overwrites one: the router needs create and delete on Secrets, not update.
const ruleSecretPrefix = "e2b-egress-"

// newRuleSecretName is a fresh Secret name for a claim's header values.
func newRuleSecretName() (string, error) {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("naming the rules Secret: %w", err)
	}
	return ruleSecretPrefix + hex.EncodeToString(b), nil
}

// createRuleSecret writes values to Secret name in c's namespace, owned by c (deleted with it).
func (f *FrontDoor) createRuleSecret(ctx context.Context, c *extensionsv1beta1.SandboxClaim, name string, values map[string][]byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace,
			Labels: map[string]string{e2bapi.SandboxLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extensionsv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
				Name: c.Name, UID: c.UID}}},
		Type: corev1.SecretTypeOpaque,
		Data: values,
	}
	if err := f.client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating Secret %s/%s for network.rules: %w", c.Namespace, name, err)
	}
	return nil
}

// deleteRuleSecret deletes rules Secret name in ns; a name without the prefix (or "") is left.
func (f *FrontDoor) deleteRuleSecret(ctx context.Context, ns, name string) error {
	if !strings.HasPrefix(name, ruleSecretPrefix) {
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := f.client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting rules Secret %s/%s: %w", ns, name, err)
	}
	return nil
}
