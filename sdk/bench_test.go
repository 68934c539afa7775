package sdk

import (
	"context"
	"io"
	"testing"
)

// BenchmarkRunTrue measures Runtime.Run("true") against an in-process sandboxd on loopback: the
// SDK's legacy POST /execute, the daemon's fork/exec and wait, and the JSON result.
func BenchmarkRunTrue(b *testing.B) {
	rt, err := NewRuntime(Endpoint{URL: startSandboxd(b).legacyURL})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		res, err := rt.Run(ctx, "true")
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run(true) = %+v, %v", res, err)
		}
	}
}

// BenchmarkStreamTrue measures Runtime.Stream of `true` over sandboxd's gRPC Start, a new
// connection per call as Stream makes one.
func BenchmarkStreamTrue(b *testing.B) {
	addrs := startSandboxd(b)
	rt, err := NewRuntime(Endpoint{URL: addrs.legacyURL, GRPCAddr: addrs.grpcAddr})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if code, err := rt.Stream(ctx, []string{"true"}, io.Discard, io.Discard); err != nil || code != 0 {
			b.Fatalf("Stream(true) = %d, %v", code, err)
		}
	}
}
