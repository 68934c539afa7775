package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"testing"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
)

// BenchmarkExecuteTrue measures one gRPC Execute round trip of `true` on loopback: request,
// fork/exec, wait, response.
func BenchmarkExecuteTrue(b *testing.B) {
	td := startDaemon(b)
	ctx := context.Background()
	req := &processv1.ExecuteRequest{Config: cfgOf("true")}
	for b.Loop() {
		if _, err := td.grpc.Execute(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartTrue is the same round trip through the streaming Start call.
func BenchmarkStartTrue(b *testing.B) {
	td := startDaemon(b)
	ctx := context.Background()
	req := &processv1.StartRequest{Config: cfgOf("true")}
	for b.Loop() {
		stream, err := td.grpc.Start(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

const benchFileSize = 16 << 20

func benchPayload(b *testing.B) []byte {
	data := make([]byte, benchFileSize)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkUpload measures PUT /v1/files throughput (atomic write with fsync) of 16 MiB files.
func BenchmarkUpload(b *testing.B) {
	td := startDaemon(b)
	data := benchPayload(b)
	b.SetBytes(benchFileSize)
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPut, td.rest+"/v1/files/bench.bin", bytes.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("PUT = %d", resp.StatusCode)
		}
	}
}

// BenchmarkDownload measures GET /v1/files throughput of a 16 MiB file.
func BenchmarkDownload(b *testing.B) {
	td := startDaemon(b)
	req, _ := http.NewRequest(http.MethodPut, td.rest+"/v1/files/bench.bin", bytes.NewReader(benchPayload(b)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	b.SetBytes(benchFileSize)
	for b.Loop() {
		resp, err := http.Get(td.rest + "/v1/files/bench.bin")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchFileSize {
			b.Fatalf("GET read %d bytes, %v", n, err)
		}
	}
}
