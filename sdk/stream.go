package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
)

// stdinChunk is the largest piece of input sent in one WriteStdin call.
const stdinChunk = 32 << 10

// Stream runs argv (no shell) through sandboxd's gRPC ProcessService and copies its output to
// stdout and stderr as it arrives; it returns the exit code (-1 when killed by a signal).
// It needs Endpoint.GRPCAddr: the router speaks HTTP/1.1 only, so streaming goes straight to
// the pod. Cancelling ctx stops the process.
func (r *Runtime) Stream(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	return r.Exec(ctx, ExecOptions{Argv: argv, Stdout: stdout, Stderr: stderr})
}

// TerminalSize is a pseudo-terminal's size in character cells.
type TerminalSize struct {
	Cols, Rows uint16
}

// ExecOptions describe one interactive command for Runtime.Exec.
type ExecOptions struct {
	// Argv is the program and its arguments (no shell).
	Argv []string
	// Stdin, when set, is copied to the command's input until it ends, which the command sees
	// as end of file (Ctrl-D on a terminal). When nil the command's input is closed at once.
	Stdin io.Reader
	// Stdout and Stderr receive the output as it arrives; with TTY both arrive on Stdout.
	Stdout, Stderr io.Writer
	// TTY, when set, runs the command on a pseudo-terminal of this size (0x0: the daemon's
	// default), as `ssh -t` or `kubectl exec -t` do.
	TTY *TerminalSize
	// Resize, with TTY, delivers new sizes while the command runs (the local window changed).
	Resize <-chan TerminalSize
	// Cwd, when set, is the working directory: a path inside the sandbox root, which sandboxd
	// confines like a file path. Empty means the root.
	Cwd string
	// Env is added to the command's environment; it wins over the daemon's and the claim's.
	Env map[string]string
}

// Exec runs a command through sandboxd's gRPC ProcessService with its input, output and
// optionally a pseudo-terminal connected, and returns its exit code (-1 when killed by a
// signal). Like Stream it needs Endpoint.GRPCAddr. Cancelling ctx stops the process. A Stdin
// that blocks (a terminal) may still be in a Read when Exec returns; the CLI exits then.
func (r *Runtime) Exec(ctx context.Context, o ExecOptions) (int, error) {
	if r.grpcAddr == "" {
		return -1, errors.New("streaming exec needs Endpoint.GRPCAddr (sandboxd's gRPC address, host:9090); it cannot go through the router")
	}
	if len(o.Argv) == 0 {
		return -1, errors.New("exec: argv is empty; pass the program and its arguments")
	}
	if o.Stdout == nil || (o.Stderr == nil && o.TTY == nil) {
		return -1, errors.New("exec: ExecOptions.Stdout and Stderr (Stdout only with TTY) are required")
	}
	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return -1, fmt.Errorf("sandbox runtime: exec: connecting to %s: %w", r.grpcAddr, err)
	}
	defer conn.Close()
	if auth := r.headers.Get("Authorization"); auth != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stdin and resize goroutines
	procs := processv1.NewProcessServiceClient(conn)
	req := &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: o.Argv, EnvVars: o.Env}}
	if o.Cwd != "" {
		req.Config.Cwd = &o.Cwd
	}
	if o.TTY != nil {
		req.Pty = &processv1.PTY{Cols: uint32(o.TTY.Cols), Rows: uint32(o.TTY.Rows)}
	}
	events, err := procs.Start(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("sandbox runtime: exec %q: %w", o.Argv[0], err)
	}
	first, err := events.Recv()
	if err != nil {
		return -1, fmt.Errorf("sandbox runtime: exec %q: %w", o.Argv[0], err)
	}
	if first.GetInit() == nil {
		return -1, fmt.Errorf("sandbox runtime: exec %q: the daemon sent %T before the init event", o.Argv[0], first.GetEvent())
	}
	pid := first.GetInit().GetProcessId()
	go feedStdin(ctx, procs, pid, o.Stdin)
	if o.TTY != nil && o.Resize != nil {
		go forwardResizes(ctx, procs, pid, o.Resize)
	}
	return copyEvents(events, o.Argv[0], o.Stdout, o.Stderr)
}

// copyEvents writes output events until the exit event and returns its code.
func copyEvents(events grpc.ServerStreamingClient[processv1.StartResponse], name string, stdout, stderr io.Writer) (int, error) {
	for {
		ev, err := events.Recv()
		if err != nil {
			// The stream ends only after an exit event; EOF before it means the daemon went away.
			return -1, fmt.Errorf("sandbox runtime: exec %q ended without an exit code: %w", name, err)
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
			return -1, fmt.Errorf("sandbox runtime: exec %q: writing output: %w", name, err)
		}
	}
}

// feedStdin copies in to the process, then ends its input. Failures end the copy quietly: the
// process has exited (its output stream says so) or the call is over.
func feedStdin(ctx context.Context, procs processv1.ProcessServiceClient, pid int32, in io.Reader) {
	if in != nil {
		buf := make([]byte, stdinChunk)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				// Copied: the request may still be in flight when buf is reused.
				input := append([]byte(nil), buf[:n]...)
				if _, werr := procs.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: pid,
					Payload: &processv1.WriteStdinRequest_Input{Input: input}}); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	_, _ = procs.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: pid,
		Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}})
}

func forwardResizes(ctx context.Context, procs processv1.ProcessServiceClient, pid int32, sizes <-chan TerminalSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-sizes:
			if !ok {
				return
			}
			_, _ = procs.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: pid, Cols: uint32(s.Cols), Rows: uint32(s.Rows)})
		}
	}
}
