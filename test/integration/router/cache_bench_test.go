package router

import (
	"context"
	"testing"

	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// BenchmarkCacheLookup measures the router's per-request Sandbox lookup in its informer cache,
// synced from a real API server, watching every namespace (the default) or a list of them
// (--sandbox-namespaces): run with -benchmem to see what each request allocates.
func BenchmarkCacheLookup(b *testing.B) {
	ns := env.Namespace(b)
	framework.MustCreate(b, context.Background(), env.Client, builder.MakeSandbox("lookup", ns).Obj())
	b.Run("all namespaces", func(b *testing.B) { benchmarkLookup(b, ns, nil) })
	b.Run("listed namespaces", func(b *testing.B) { benchmarkLookup(b, ns, []string{ns, "other"}) })
}

func benchmarkLookup(b *testing.B, ns string, namespaces []string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := resolve.NewCache(env.Config, namespaces)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForSync(ctx) {
		b.Fatal("cache did not sync")
	}
	framework.Eventually(b, func(ctx context.Context) error {
		got, err := c.Sandbox(ctx, ns, "lookup")
		if err == nil && got == nil {
			err = context.DeadlineExceeded
		}
		return err
	})
	b.ReportAllocs()
	for b.Loop() {
		if got, err := c.Sandbox(ctx, ns, "lookup"); err != nil || got == nil {
			b.Fatalf("lookup = %v, %v", got, err)
		}
	}
}
