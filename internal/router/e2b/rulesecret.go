package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// ruleSecretPrefix starts the name of every Secret holding a claim's E2B rules header values.
// The front door deletes only Secrets so named, and a fresh name per create or network update
// means it never overwrites one: the router needs create, delete and (for forks' shares) patch
// of owner references on Secrets, not update.
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
			Labels:          map[string]string{e2bapi.SandboxLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{claimOwner(c)}},
		Type: corev1.SecretTypeOpaque,
		Data: values,
		// Never rewritten: claims that share it (a fork and its source) hold the same values.
		Immutable: ptr.To(true),
	}
	if err := f.client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating Secret %s/%s for network.rules: %w", c.Namespace, name, err)
	}
	return nil
}

// shareRuleSecret makes claim c an owner of rules Secret name, beside the claims already owning
// it: a fork uses its source's Secret, and keeps it when the source is deleted (the garbage
// collector deletes a Secret once none of its owners is left). The router cannot read Secrets,
// so it shares rather than copies; the Secret is never rewritten, so a share is a copy. A
// strategic merge patch (owner references merge by uid) needs no read first.
func (f *FrontDoor) shareRuleSecret(ctx context.Context, c *extensionsv1beta1.SandboxClaim, name string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{claimOwner(c)}}})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
	if err := f.client.Patch(ctx, s, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("sharing rules Secret %s/%s with SandboxClaim %s: %w", c.Namespace, name, c.Name, err)
	}
	return nil
}

// releaseRuleSecret gives up claim c's share of rules Secret name (one without the prefix, or "",
// is left): c stops owning it, and when no other claim does, it is deleted. The router's
// admission policy refuses a patch that would leave the Secret without an owner; that refusal,
// or no owner left where no policy is installed, means c was the last and deletes it.
func (f *FrontDoor) releaseRuleSecret(ctx context.Context, c *extensionsv1beta1.SandboxClaim, name string) error {
	if !strings.HasPrefix(name, ruleSecretPrefix) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []map[string]any{{"$patch": "delete", "uid": c.UID}}}})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
	err = f.client.Patch(ctx, s, client.RawPatch(types.StrategicMergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err == nil && len(s.OwnerReferences) > 0:
		return nil
	case err != nil && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		return fmt.Errorf("releasing rules Secret %s/%s of SandboxClaim %s: %w", c.Namespace, name, c.Name, err)
	}
	return f.deleteRuleSecret(ctx, c.Namespace, name)
}

// claimOwner is the owner reference naming c.
func claimOwner(c *extensionsv1beta1.SandboxClaim) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: extensionsv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: c.Name, UID: c.UID}
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
