package sdk

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// BenchmarkClaimToReady measures Client.Claim from a warm pool of 3 (create, watch until Ready)
// and Release, with the real controllers and a kubelet stand-in that marks Pods Ready.
func BenchmarkClaimToReady(b *testing.B) {
	ns := env.Namespace(b)
	env.PlayKubelet(b, ns)
	warmPool(b, ns, 3)
	c := newClient(b)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultTimeout)
		sb, err := c.Claim(ctx, sdk.ClaimOptions{WarmPool: "pool", Namespace: ns})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		if err := sb.Release(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
