package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
)

// Stream runs argv (no shell) through sandboxd's gRPC ProcessService and copies its output to
// stdout and stderr as it arrives; it returns the exit code (-1 when killed by a signal).
// It needs Endpoint.GRPCAddr: the router speaks HTTP/1.1 only, so streaming goes straight to
// the pod. Cancelling ctx stops the process.
func (r *Runtime) Stream(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	if r.grpcAddr == "" {
		return -1, errors.New("streaming exec needs Endpoint.GRPCAddr (sandboxd's gRPC address, host:9090); it cannot go through the router")
	}
	if len(argv) == 0 {
		return -1, errors.New("Stream: argv is empty; pass the program and its arguments")
	}
	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return -1, fmt.Errorf("sandbox runtime: stream: connecting to %s: %w", r.grpcAddr, err)
	}
	defer conn.Close()
	if auth := r.headers.Get("Authorization"); auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	events, err := processv1.NewProcessServiceClient(conn).Start(ctx,
		&processv1.StartRequest{Config: &processv1.ProcessConfig{Command: argv}})
	if err != nil {
		return -1, fmt.Errorf("sandbox runtime: stream %q: %w", argv[0], err)
	}
	for {
		ev, err := events.Recv()
		if err != nil {
			// The stream ends only after an exit event; EOF before it means the daemon went away.
			return -1, fmt.Errorf("sandbox runtime: stream %q ended without an exit code: %w", argv[0], err)
		}
		switch {
		case ev.GetExit() != nil:
			return int(ev.GetExit().GetExitCode()), nil
		case ev.GetStdout() != nil:
			_, err = stdout.Write(ev.GetStdout())
		case ev.GetStderr() != nil:
			_, err = stderr.Write(ev.GetStderr())
		}
		if err != nil {
			return -1, fmt.Errorf("sandbox runtime: stream %q: writing output: %w", argv[0], err)
		}
	}
}
