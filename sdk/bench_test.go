package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

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

// benchTarget is the sandbox the benchmarks below measure: the one at PADDOCK_BENCH_SANDBOX (a
// pod IP or host name of a sandbox running sandboxd with its default ports), or else an
// in-process sandboxd on loopback.
func benchTarget(b *testing.B) (legacyURL, restURL string) {
	if host := os.Getenv("PADDOCK_BENCH_SANDBOX"); host != "" {
		return "http://" + net.JoinHostPort(host, "8888"), "http://" + net.JoinHostPort(host, "8080")
	}
	addrs := startSandboxd(b)
	return addrs.legacyURL, addrs.restURL
}

// BenchmarkSandboxExecTrue reports the round trip of Runtime.Run("true") with its p50 and p99:
// against a real sandbox when PADDOCK_BENCH_SANDBOX names one, e.g.
//
//	PADDOCK_BENCH_SANDBOX=198.18.0.7 go test ./sdk -run '^$' -bench SandboxExecTrue -benchtime 500x
func BenchmarkSandboxExecTrue(b *testing.B) {
	legacy, _ := benchTarget(b)
	rt, err := NewRuntime(Endpoint{URL: legacy})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := rt.Run(ctx, "true")
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run(true) = %+v, %v", res, err)
		}
		took = append(took, time.Since(start))
	}
	reportPercentiles(b, took)
}

// BenchmarkSandboxFiles reports upload and download throughput of an 8 MiB file through
// Files, against the same target as BenchmarkSandboxExecTrue.
func BenchmarkSandboxFiles(b *testing.B) {
	_, rest := benchTarget(b)
	files, err := NewFiles(Endpoint{URL: rest})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 8<<20)
	if _, err := rand.Read(payload); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("upload", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			if err := files.Upload(ctx, "bench.bin", bytes.NewReader(payload), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("download", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			n, _, err := files.Download(ctx, "bench.bin", io.Discard)
			if err != nil || n != int64(len(payload)) {
				b.Fatalf("Download = %d bytes, %v; want %d", n, err, len(payload))
			}
		}
	})
}

// reportPercentiles adds p50 and p99 of the samples, in milliseconds, to the benchmark's output.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
