package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os/exec"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

// GRPCServer returns a gRPC server with ProcessService and server reflection registered.
func (d *Daemon) GRPCServer() *grpc.Server {
	s := grpc.NewServer(d.grpcAuth()...)
	processv1.RegisterProcessServiceServer(s, &processService{d: d})
	reflection.Register(s)
	return s
}

type processService struct {
	processv1.UnimplementedProcessServiceServer
	d *Daemon
}

// spec turns a ProcessConfig into a process.Spec: the daemon's environment, then the claim's,
// then the request's; the working directory confined to the root.
func (d *Daemon) spec(ctx context.Context, cfg *processv1.ProcessConfig) (process.Spec, error) {
	if cfg == nil || len(cfg.GetCommand()) == 0 || cfg.GetCommand()[0] == "" {
		return process.Spec{}, status.Error(codes.InvalidArgument, "command is required: set config.command to argv, e.g. [\"/bin/sh\", \"-c\", \"...\"]")
	}
	rel, err := d.root.ResolveContext(ctx, cfg.GetCwd())
	if err != nil {
		switch {
		case pathsafe.IsEscape(err):
			return process.Spec{}, status.Errorf(codes.PermissionDenied, "cwd: %v", err)
		case errors.Is(err, pathsafe.ErrTooLong), errors.Is(err, pathsafe.ErrInvalid):
			return process.Spec{}, status.Errorf(codes.InvalidArgument, "cwd: %v", err)
		case ctx.Err() != nil:
			return process.Spec{}, status.FromContextError(ctx.Err()).Err()
		}
		return process.Spec{}, status.Errorf(codes.Internal, "cwd: %v", err)
	}
	return process.Spec{
		Command: cfg.GetCommand(),
		Env:     process.MergeEnv(d.cfg.Environ, d.claims.Env(), cfg.GetEnvVars()),
		Dir:     d.root.Abs(rel),
	}, nil
}

// processLimitError is a start refused by --max-processes: ResourceExhausted over gRPC, and
// (through Unwrap) 429 over HTTP.
type processLimitError struct {
	err *process.TooManyProcessesError
}

func (e processLimitError) Error() string { return e.err.Error() }
func (e processLimitError) Unwrap() error { return e.err }
func (e processLimitError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.err.Error())
}

// commandError maps a failure to start a command to a gRPC status.
func commandError(err error) error {
	var tooMany *process.TooManyProcessesError
	switch {
	case errors.As(err, &tooMany):
		return processLimitError{tooMany}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return status.Errorf(codes.NotFound, "starting command: %v", err)
	case errors.Is(err, fs.ErrPermission):
		return status.Errorf(codes.PermissionDenied, "starting command: %v", err)
	default:
		return status.Errorf(codes.Internal, "starting command: %v", err)
	}
}

func (s *processService) Start(req *processv1.StartRequest, stream grpc.ServerStreamingServer[processv1.StartResponse]) error {
	return s.d.start(stream.Context(), req, stream.Send)
}

// start runs req and sends its events: init, output chunks, exit. The gRPC Start call and the
// HTTP stream (POST /v1/processes) share it. A failure before the process started is returned
// before anything is sent; ending ctx, or a failed send, kills the process group.
func (d *Daemon) start(ctx context.Context, req *processv1.StartRequest, send func(*processv1.StartResponse) error) error {
	spec, err := d.spec(ctx, req.GetConfig())
	if err != nil {
		return err
	}
	if pty := req.Pty; pty != nil {
		if pty.GetCols() > math.MaxUint16 || pty.GetRows() > math.MaxUint16 {
			return status.Errorf(codes.InvalidArgument, "pty size %dx%d is too large; cols and rows must be at most %d", pty.GetCols(), pty.GetRows(), math.MaxUint16)
		}
		spec.PTY = &process.Size{Cols: uint16(pty.GetCols()), Rows: uint16(pty.GetRows())}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := d.procs.Start(ctx, spec)
	if err != nil {
		return commandError(err)
	}
	defer d.procs.Release(p)
	var sendErr error
	emit := func(ev *processv1.StartResponse) {
		if sendErr != nil {
			return // keep draining so the process is reaped
		}
		if sendErr = send(ev); sendErr != nil {
			cancel()
		}
	}
	emit(&processv1.StartResponse{Event: &processv1.StartResponse_Init{Init: &processv1.InitEvent{ProcessId: p.ID()}}})
	for chunk := range p.Output() {
		ev := &processv1.StartResponse{Event: &processv1.StartResponse_Stdout{Stdout: chunk.Data}}
		if chunk.Stream == process.Stderr {
			ev.Event = &processv1.StartResponse_Stderr{Stderr: chunk.Data}
		}
		emit(ev)
	}
	code := p.Wait()
	// Forget the id before the exit event, so a client that saw the exit gets NotFound.
	d.procs.Release(p)
	if sendErr != nil {
		return status.Errorf(codes.Internal, "sending to the client failed, so the process was killed: %v", sendErr)
	}
	return send(&processv1.StartResponse{Event: &processv1.StartResponse_Exit{Exit: &processv1.ExitEvent{ExitCode: int32(code)}}})
}

func (s *processService) Execute(ctx context.Context, req *processv1.ExecuteRequest) (*processv1.ExecuteResponse, error) {
	spec, err := s.d.spec(ctx, req.GetConfig())
	if err != nil {
		return nil, err
	}
	res, err := s.d.procs.Run(ctx, spec, s.d.cfg.MaxExecuteOutputBytes)
	var overflow *process.ErrOutputLimit
	switch {
	case errors.As(err, &overflow):
		return nil, status.Error(codes.ResourceExhausted, err.Error())
	case err != nil:
		return nil, commandError(err)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &processv1.ExecuteResponse{ExitCode: int32(res.ExitCode), Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

func (s *processService) lookup(id int32) (*process.Process, error) {
	p, err := s.d.procs.Get(id)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "process %d not found; ids are valid only while their Start call is open", id)
	}
	return p, nil
}

func (s *processService) WriteStdin(_ context.Context, req *processv1.WriteStdinRequest) (*processv1.WriteStdinResponse, error) {
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if req.GetEof() != nil {
		err = p.CloseStdin()
	} else {
		err = p.WriteStdin(req.GetInput())
	}
	switch {
	case err != nil && p.Exited():
		return nil, status.Errorf(codes.FailedPrecondition, "process %d has exited; its stdin is closed", req.GetProcessId())
	case err != nil:
		return nil, status.Errorf(codes.Internal, "writing stdin of process %d: %v", req.GetProcessId(), err)
	}
	return &processv1.WriteStdinResponse{}, nil
}

var signals = map[processv1.Signal]syscall.Signal{
	processv1.Signal_SIGNAL_SIGINT:  syscall.SIGINT,
	processv1.Signal_SIGNAL_SIGKILL: syscall.SIGKILL,
	processv1.Signal_SIGNAL_SIGTERM: syscall.SIGTERM,
}

func (s *processService) SendSignal(_ context.Context, req *processv1.SendSignalRequest) (*processv1.SendSignalResponse, error) {
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	sig, ok := signals[req.GetSignal()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "signal %v is not supported; use SIGNAL_SIGINT, SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.GetSignal())
	}
	if err := p.Signal(sig); err != nil {
		return nil, status.Errorf(codes.Internal, "signalling process %d: %v", req.GetProcessId(), err)
	}
	return &processv1.SendSignalResponse{}, nil
}

func (s *processService) ResizeTTY(_ context.Context, req *processv1.ResizeTTYRequest) (*processv1.ResizeTTYResponse, error) {
	p, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	if req.GetCols() > math.MaxUint16 || req.GetRows() > math.MaxUint16 {
		return nil, status.Errorf(codes.InvalidArgument, "size %dx%d is too large; cols and rows must be at most %d", req.GetCols(), req.GetRows(), math.MaxUint16)
	}
	if err := p.Resize(process.Size{Cols: uint16(req.GetCols()), Rows: uint16(req.GetRows())}); err != nil {
		return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf("failed to resize TTY: %v", err))
	}
	return &processv1.ResizeTTYResponse{}, nil
}
