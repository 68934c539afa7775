package mcp

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/framework"
)

func getClaim(t *testing.T, ns, name string) (*extensionsv1beta1.SandboxClaim, error) {
	claim := &extensionsv1beta1.SandboxClaim{}
	err := env.Client.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKey{Namespace: ns, Name: name}, claim)
	return claim, err
}

// claimsGone fails while a claim other than except is in ns, deleting or not.
func claimsGone(ctx context.Context, ns, except string) error {
	list := &extensionsv1beta1.SandboxClaimList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	var left []string
	for _, c := range list.Items {
		if c.Name != except {
			left = append(left, c.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("claims still there: %v", left)
	}
	return nil
}
