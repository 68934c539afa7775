// Package extindex registers the cache field indexes the extensions controllers use. It is the
// one place they are defined, so the manager and every test register them the same way.
//
// TODO(lead): fold into internal/controller/indexes once that package lands on main.
package extindex

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Register adds every extensions index to indexer.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxWarmPoolIndex, SandboxByWarmPool},
		{&agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxClaimUIDIndex, SandboxByClaimUID},
		{&extensionsv1beta1.SandboxWarmPool{}, extensionsv1beta1.TemplateRefField, WarmPoolByTemplate},
		{&extensionsv1beta1.SandboxClaim{}, extensionsv1beta1.WarmPoolRefField, ClaimByWarmPool},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("registering index %s: %w", ix.field, err)
		}
	}
	return nil
}

// SandboxByWarmPool indexes a Sandbox by its WarmPoolSandboxLabel value.
func SandboxByWarmPool(obj client.Object) []string {
	return labelValue(obj, agentsv1beta1.WarmPoolSandboxLabel)
}

// SandboxByClaimUID indexes a Sandbox by its ClaimUIDLabel value.
func SandboxByClaimUID(obj client.Object) []string {
	return labelValue(obj, agentsv1beta1.ClaimUIDLabel)
}

// WarmPoolByTemplate indexes a SandboxWarmPool by spec.sandboxTemplateRef.name.
func WarmPoolByTemplate(obj client.Object) []string {
	if p, ok := obj.(*extensionsv1beta1.SandboxWarmPool); ok && p.Spec.TemplateRef.Name != "" {
		return []string{p.Spec.TemplateRef.Name}
	}
	return nil
}

// ClaimByWarmPool indexes a SandboxClaim by spec.warmPoolRef.name.
func ClaimByWarmPool(obj client.Object) []string {
	if c, ok := obj.(*extensionsv1beta1.SandboxClaim); ok && c.Spec.WarmPoolRef.Name != "" {
		return []string{c.Spec.WarmPoolRef.Name}
	}
	return nil
}

func labelValue(obj client.Object, key string) []string {
	if v := obj.GetLabels()[key]; v != "" {
		return []string{v}
	}
	return nil
}
