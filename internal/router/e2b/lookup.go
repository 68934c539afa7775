package e2b

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// The front door's lookups of a sandbox's claim, Sandbox and token, shared by the handlers, the
// wait for a daemon and the data plane.

// claimFor reads the front-door claim id in ns from the API server (not the cache, so a caller
// sees its own last write); nil when there is none, or it is being deleted.
func (f *FrontDoor) claimFor(ctx context.Context, ns, id string) (*extensionsv1beta1.SandboxClaim, error) {
	if !e2bapi.IsID(id) {
		return nil, nil
	}
	var c extensionsv1beta1.SandboxClaim
	err := f.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: id}, &c)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading SandboxClaim %s/%s: %w", ns, id, err)
	case c.Labels[e2bapi.SandboxLabel] != "true" || c.DeletionTimestamp != nil:
		return nil, nil
	}
	return &c, nil
}

// boundSandbox is the Sandbox bound to c, read from the API server; nil while c is unbound.
func (f *FrontDoor) boundSandbox(ctx context.Context, c *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	name := c.Status.Sandbox.Name
	if cached := f.cachedSandbox(ctx, c.Namespace, c.UID); cached != nil {
		name = cached.Name
	}
	if name == "" {
		return nil, nil
	}
	var sb agentsv1beta1.Sandbox
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Sandbox %s/%s: %w", c.Namespace, name, err)
	}
	return &sb, nil
}

// cachedSandbox is the Sandbox labelled with the claim's UID in the cache, or nil.
func (f *FrontDoor) cachedSandbox(ctx context.Context, ns string, uid types.UID) *agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	if err := f.cache.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{agentsv1beta1.SandboxClaimUIDIndex: string(uid)}); err != nil {
		return nil
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return &list.Items[i]
		}
	}
	return nil
}

// sandboxToken derives the sandbox token of sb from the cluster's credentials key.
func (f *FrontDoor) sandboxToken(sb *agentsv1beta1.Sandbox) (string, error) {
	return f.cfg.Tokens.SandboxToken(sb.Namespace, sb.Name, sb.UID)
}
