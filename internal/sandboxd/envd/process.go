package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"

	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

// tracked is a process started through envd: the manager's process plus what E2B clients see
// of it (pid, tag, config) and the streams following it. Its pump goroutine is the only reader
// of the process's output; it hands every event to each follower, so a process keeps running,
// and is reaped, whether or not anyone follows it.
type tracked struct {
	pid    uint32
	tag    *string
	config *pb.ProcessConfig
	proc   *process.Process
	pty    bool
	cancel context.CancelFunc

	mu        sync.Mutex
	followers map[*follower]struct{}
	end       *pb.ProcessEvent // set once the process has ended
}

// follower is one stream receiving a process's events.
type follower struct {
	events chan *pb.ProcessEvent
	gone   chan struct{}
}

// follow adds a follower; when the process has already ended it gets only the end event.
func (t *tracked) follow() *follower {
	f := &follower{events: make(chan *pb.ProcessEvent, 64), gone: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end != nil {
		f.events <- t.end
		return f
	}
	t.followers[f] = struct{}{}
	return f
}

func (t *tracked) unfollow(f *follower) {
	t.mu.Lock()
	delete(t.followers, f)
	t.mu.Unlock()
	close(f.gone)
}

// broadcast hands ev to every follower, waiting for slow ones (so output is never dropped for a
// client that is still there) but not for those that left.
func (t *tracked) broadcast(ev *pb.ProcessEvent, last bool) {
	t.mu.Lock()
	if last {
		t.end = ev
	}
	followers := make([]*follower, 0, len(t.followers))
	for f := range t.followers {
		followers = append(followers, f)
	}
	t.mu.Unlock()
	for _, f := range followers {
		select {
		case f.events <- ev:
		case <-f.gone:
		}
	}
}

// processTable holds the processes that envd clients may address by pid or tag.
type processTable struct {
	mu    sync.Mutex
	byPID map[uint32]*tracked
}

func (pt *processTable) add(t *tracked) {
	pt.mu.Lock()
	pt.byPID[t.pid] = t
	pt.mu.Unlock()
}

func (pt *processTable) remove(t *tracked) {
	pt.mu.Lock()
	delete(pt.byPID, t.pid)
	pt.mu.Unlock()
}

func (pt *processTable) list() []*tracked {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	out := make([]*tracked, 0, len(pt.byPID))
	for _, t := range pt.byPID {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *tracked) int { return int(a.pid) - int(b.pid) })
	return out
}

// find returns the running process the selector names.
func (pt *processTable) find(sel *pb.ProcessSelector) (*tracked, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if t, ok := pt.byPID[s.Pid]; ok {
			return t, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found; it has exited or was never started", s.Pid))
	case *pb.ProcessSelector_Tag:
		for _, t := range pt.byPID {
			if t.tag != nil && *t.tag == s.Tag {
				return t, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found; it has exited or was never started", s.Tag))
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector is required: set process.pid or process.tag"))
	}
}

type processService struct {
	s *Server
}

// spec turns a ProcessConfig into a process.Spec: cmd and args as argv, the environment with
// the request's envs on top, the working directory confined to the root (the home by default).
func (s *Server) spec(cfg *pb.ProcessConfig, pty *pb.PTY) (process.Spec, error) {
	if cfg.GetCmd() == "" {
		return process.Spec{}, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required, e.g. \"/bin/bash\""))
	}
	for name, value := range cfg.GetEnvs() {
		if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0) {
			return process.Spec{}, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("process.envs[%q]: names must be non-empty without '=' or NUL, values without NUL", name))
		}
	}
	rel, err := s.paths.resolve(cfg.GetCwd())
	if err != nil {
		return process.Spec{}, pathError("process.cwd", cfg.GetCwd(), err)
	}
	spec := process.Spec{
		Command: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		Env:     s.cfg.Environ(cfg.GetEnvs()),
		Dir:     s.cfg.Root.Abs(rel),
	}
	if pty != nil {
		size := pty.GetSize()
		if size.GetCols() > math.MaxUint16 || size.GetRows() > math.MaxUint16 {
			return process.Spec{}, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("pty.size %dx%d is too large; cols and rows must be at most %d", size.GetCols(), size.GetRows(), math.MaxUint16))
		}
		spec.PTY = &process.Size{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}
	}
	return spec, nil
}

// startError maps a failure to start a command.
func startError(err error) error {
	var tooMany *process.TooManyProcessesError
	switch {
	case errors.As(err, &tooMany):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("starting command: %w", err))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("starting command: %w", err))
	default:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("starting command: %w", err))
	}
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	if err := checkUser(req.Header()); err != nil {
		return err
	}
	spec, err := ps.s.spec(req.Msg.GetProcess(), req.Msg.Pty)
	if err != nil {
		return err
	}
	life, cancel := lifetime(ctx)
	p, err := ps.s.cfg.Procs.Start(life, spec)
	if err != nil {
		cancel()
		return startError(err)
	}
	// stdin:false (what commands.run sends) means the command reads EOF, not a pipe nobody writes.
	if spec.PTY == nil && req.Msg.Stdin != nil && !*req.Msg.Stdin {
		_ = p.CloseStdin()
	}
	t := &tracked{pid: uint32(p.ID()), tag: req.Msg.Tag, config: req.Msg.GetProcess(), proc: p,
		pty: spec.PTY != nil, cancel: cancel, followers: map[*follower]struct{}{}}
	f := t.follow()
	ps.s.procs.add(t)
	go ps.s.pump(t)
	return ps.s.stream(ctx, t, f, req.Header(), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	})
}

// pump reads the process's output until it ends, then forgets it and announces the end.
func (s *Server) pump(t *tracked) {
	for chunk := range t.proc.Output() {
		data := &pb.ProcessEvent_DataEvent{}
		switch {
		case t.pty:
			data.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: chunk.Data}
		case chunk.Stream == process.Stderr:
			data.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: chunk.Data}
		default:
			data.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: chunk.Data}
		}
		t.broadcast(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data}}, false)
	}
	code := t.proc.Wait()
	// Forget the pid before announcing the end, so a client that saw the end gets NotFound.
	s.procs.remove(t)
	s.cfg.Procs.Release(t.proc)
	t.cancel()
	t.broadcast(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: endEvent(code, t.proc.State())}}, true)
}

// endEvent describes how a process ended, as envd does: a clean exit has exited=true and its
// code; a signal has exit code -1, exited=false and the signal as the error.
func endEvent(code int, state string) *pb.ProcessEvent_EndEvent {
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: code >= 0, Status: state}
	if code < 0 {
		end.Error = &state
	}
	return end
}

// stream sends a process's events to one client: start first, then data and end, with
// keepalives in between. The client leaving ends the stream, not the process.
func (s *Server) stream(ctx context.Context, t *tracked, f *follower, h interface{ Get(string) string }, send func(*pb.ProcessEvent) error) error {
	defer t.unfollow(f)
	tick, stop := keepalive(h.Get("Keepalive-Ping-Interval"))
	defer stop()
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: t.pid}}}); err != nil {
		return err
	}
	for {
		select {
		case ev := <-f.events:
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
		case <-tick:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
		}
	}
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	t, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	return ps.s.stream(ctx, t, t.follow(), req.Header(), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

func (ps *processService) List(context.Context, *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	out := &pb.ListResponse{}
	for _, t := range ps.s.procs.list() {
		out.Processes = append(out.Processes, &pb.ProcessInfo{Config: t.config, Pid: t.pid, Tag: t.tag})
	}
	return connect.NewResponse(out), nil
}

func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	t, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	size := req.Msg.GetPty().GetSize()
	if size == nil {
		return connect.NewResponse(&pb.UpdateResponse{}), nil // nothing to change
	}
	if size.GetCols() > math.MaxUint16 || size.GetRows() > math.MaxUint16 {
		return nil, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("pty.size %dx%d is too large; cols and rows must be at most %d", size.GetCols(), size.GetRows(), math.MaxUint16))
	}
	if err := t.proc.Resize(process.Size{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

// write sends input to a process: stdin bytes to its stdin, pty bytes to its terminal.
func write(t *tracked, in *pb.ProcessInput) error {
	var data []byte
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		data = v.Stdin
	case *pb.ProcessInput_Pty:
		data = v.Pty
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input is required: set input.stdin or input.pty"))
	}
	if err := t.proc.WriteStdin(data); err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("writing input of process %d: %w", t.pid, err))
	}
	return nil
}

func (ps *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	t, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := write(t, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (ps *processService) StreamInput(_ context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var t *tracked
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			found, err := ps.s.procs.find(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			t = found
		case *pb.StreamInputRequest_Data:
			if t == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the first message must be start{process}, naming the process"))
			}
			if err := write(t, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

var signals = map[pb.Signal]syscall.Signal{
	pb.Signal_SIGNAL_SIGTERM: syscall.SIGTERM,
	pb.Signal_SIGNAL_SIGKILL: syscall.SIGKILL,
}

func (ps *processService) SendSignal(_ context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	t, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	sig, ok := signals[req.Msg.GetSignal()]
	if !ok {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %v is not supported; use SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.GetSignal()))
	}
	if err := t.proc.Signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signalling process %d: %w", t.pid, err))
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	t, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := t.proc.CloseStdin(); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("closing stdin of process %d: %w", t.pid, err))
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}
