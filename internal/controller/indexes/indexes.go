// Package indexes holds every cache field index of Paddock. The manager and every test register
// them through Register, so a controller never depends on an index its test forgot.
package indexes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// PodBySandboxNameHash indexes a Pod by its sandbox-name-hash label.
func PodBySandboxNameHash(obj client.Object) []string {
	return labelValue(obj, agentsv1beta1.SandboxNameHashLabel)
}

// SandboxByWarmPool indexes a Sandbox by its warm-pool-sandbox label.
func SandboxByWarmPool(obj client.Object) []string {
	return labelValue(obj, agentsv1beta1.WarmPoolSandboxLabel)
}

// SandboxByClaimUID indexes a Sandbox by its claim-uid label, so a claim finds the Sandbox bound
// to it even before its own status records the binding.
func SandboxByClaimUID(obj client.Object) []string {
	return labelValue(obj, agentsv1beta1.ClaimUIDLabel)
}

// WarmPoolByTemplate indexes a SandboxWarmPool by spec.sandboxTemplateRef.name.
func WarmPoolByTemplate(obj client.Object) []string {
	pool, ok := obj.(*extensionsv1beta1.SandboxWarmPool)
	if !ok || pool.Spec.TemplateRef.Name == "" {
		return nil
	}
	return []string{pool.Spec.TemplateRef.Name}
}

// ClaimByWarmPool indexes a SandboxClaim by spec.warmPoolRef.name.
func ClaimByWarmPool(obj client.Object) []string {
	claim, ok := obj.(*extensionsv1beta1.SandboxClaim)
	if !ok || claim.Spec.WarmPoolRef.Name == "" {
		return nil
	}
	return []string{claim.Spec.WarmPoolRef.Name}
}

// index is one field index: the kind it is on, the field name and the function.
type index struct {
	obj   client.Object
	field string
	fn    client.IndexerFunc
}

// coreIndexes need only the core API group (Sandbox and Pod).
func coreIndexes() []index {
	return []index{
		{&corev1.Pod{}, agentsv1beta1.PodNameHashIndex, PodBySandboxNameHash},
		{&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxWarmPoolIndex, SandboxByWarmPool},
		{&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxClaimUIDIndex, SandboxByClaimUID},
	}
}

// extensionIndexes are on extension kinds, whose CRDs a core-only install does not have.
func extensionIndexes() []index {
	return []index{
		{&extensionsv1beta1.SandboxWarmPool{}, extensionsv1beta1.TemplateRefField, WarmPoolByTemplate},
		{&extensionsv1beta1.SandboxClaim{}, extensionsv1beta1.WarmPoolRefField, ClaimByWarmPool},
	}
}

// Register adds every field index of the project to indexer.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	return RegisterFor(ctx, indexer, true)
}

// RegisterFor adds the indexes of the core controller and, when extensions is true, those of
// the extension controllers. Without the extensions no index may name an extension kind: the
// cache would look its CRD up and a core-only install has none.
func RegisterFor(ctx context.Context, indexer client.FieldIndexer, extensions bool) error {
	all := coreIndexes()
	if extensions {
		all = append(all, extensionIndexes()...)
	}
	for _, idx := range all {
		if err := indexer.IndexField(ctx, idx.obj, idx.field, idx.fn); err != nil {
			return fmt.Errorf("registering cache index %s on %T: %w", idx.field, idx.obj, err)
		}
	}
	return nil
}

func labelValue(obj client.Object, key string) []string {
	if v, ok := obj.GetLabels()[key]; ok && v != "" {
		return []string{v}
	}
	return nil
}
