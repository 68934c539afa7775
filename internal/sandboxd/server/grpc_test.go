package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/test/framework"
)

func cfgOf(argv ...string) *processv1.ProcessConfig {
	return &processv1.ProcessConfig{Command: argv}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("error = %v, want code %v", err, want)
	}
}

// session is an open Start call with the output received so far.
type session struct {
	t      *testing.T
	stream grpc.ServerStreamingClient[processv1.StartResponse]
	pid    int32
	events []string // "out:<data>", "err:<data>", "exit:<code>" in arrival order
	stdout strings.Builder
}

func start(t *testing.T, ctx context.Context, td *testDaemon, req *processv1.StartRequest) *session {
	t.Helper()
	stream, err := td.grpc.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("receiving the init event: %v", err)
	}
	if first.GetInit() == nil {
		t.Fatalf("first event = %v, want init", first)
	}
	return &session{t: t, stream: stream, pid: first.GetInit().GetProcessId()}
}

// next receives one event and records it; it returns false after the exit event.
func (s *session) next() bool {
	s.t.Helper()
	ev, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("receiving from Start: %v (events so far %q)", err, s.events)
	}
	switch e := ev.GetEvent().(type) {
	case *processv1.StartResponse_Stdout:
		s.events = append(s.events, "out:"+string(e.Stdout))
		s.stdout.Write(e.Stdout)
	case *processv1.StartResponse_Stderr:
		s.events = append(s.events, "err:"+string(e.Stderr))
	case *processv1.StartResponse_Exit:
		s.events = append(s.events, fmt.Sprintf("exit:%d", e.Exit.GetExitCode()))
		return false
	default:
		s.t.Fatalf("unexpected event %v", ev)
	}
	return true
}

// waitStdout receives until stdout contains want; the process must still be running.
func (s *session) waitStdout(want string) {
	s.t.Helper()
	for !strings.Contains(s.stdout.String(), want) {
		if !s.next() {
			s.t.Fatalf("process exited before printing %q; events %q", want, s.events)
		}
	}
}

// finish receives until the exit event and returns its code; the stream must then end.
func (s *session) finish() int {
	s.t.Helper()
	for s.next() {
	}
	if _, err := s.stream.Recv(); !errors.Is(err, io.EOF) {
		s.t.Fatalf("after the exit event Recv = %v, want EOF", err)
	}
	code, _ := strconv.Atoi(strings.TrimPrefix(s.events[len(s.events)-1], "exit:"))
	return code
}

func TestExecuteReturnsOutputAndExitCode(t *testing.T) {
	td := startDaemon(t)
	cases := []struct {
		name    string
		argv    []string
		want    *processv1.ExecuteResponse
		wantErr codes.Code
	}{
		{name: "echo", argv: []string{"echo", "hello"}, want: &processv1.ExecuteResponse{Stdout: []byte("hello\n")}},
		{name: "non-zero exit", argv: []string{"sh", "-c", "echo oops >&2; exit 3"}, want: &processv1.ExecuteResponse{ExitCode: 3, Stderr: []byte("oops\n")}},
		{name: "killed by signal", argv: []string{"sh", "-c", "kill -KILL $$"}, want: &processv1.ExecuteResponse{ExitCode: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := td.grpc.Execute(framework.Context(t, 30*time.Second), &processv1.ExecuteRequest{Config: cfgOf(tc.argv...)})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("exit=%d out=%q err=%q", tc.want.GetExitCode(), tc.want.GetStdout(), tc.want.GetStderr())
			if diff := cmp.Diff(want, fmt.Sprintf("exit=%d out=%q err=%q", got.GetExitCode(), got.GetStdout(), got.GetStderr())); diff != "" {
				t.Errorf("Execute(%q) (-want +got):\n%s", tc.argv, diff)
			}
		})
	}
}

func TestExecuteEnvCwdAndDaemonEnvironment(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Environ = []string{"PATH=" + os.Getenv("PATH"), "FROM_DAEMON=d", "FOO=daemon"} })
	if err := os.Mkdir(filepath.Join(td.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cwd := "sub"
	got, err := td.grpc.Execute(framework.Context(t, 30*time.Second), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"sh", "-c", "echo $FOO $FROM_DAEMON; pwd"},
		EnvVars: map[string]string{"FOO": "request"},
		Cwd:     &cwd,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("request d\n"+filepath.Join(td.root, "sub")+"\n", string(got.GetStdout())); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

// TestStartStreamsBeforeExit proves output arrives while the process runs: the process prints,
// then blocks until the test answers that output on stdin, so it cannot exit first.
func TestStartStreamsBeforeExit(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	s := start(t, ctx, td, &processv1.StartRequest{Config: cfgOf("sh", "-c", "echo first; echo warn >&2; read line; echo \"got $line\"")})
	s.waitStdout("first\n")
	if _, err := td.grpc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("answer\n")}}); err != nil {
		t.Fatal(err)
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if diff := cmp.Diff("first\ngot answer\n", s.stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if last := s.events[len(s.events)-1]; last != "exit:0" {
		t.Errorf("last event %q, want exit:0 after all output", last)
	}
	if !contains(s.events, "err:warn\n") {
		t.Errorf("events %q lack stderr chunk \"warn\\n\"", s.events)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestStdinEOF(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	s := start(t, ctx, td, &processv1.StartRequest{Config: cfgOf("cat")})
	for _, req := range []*processv1.WriteStdinRequest{
		{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("abc")}},
		{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte{}}},
		{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}},
	} {
		if _, err := td.grpc.WriteStdin(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if code := s.finish(); code != 0 || s.stdout.String() != "abc" {
		t.Fatalf("cat exit %d stdout %q, want 0 and %q", code, s.stdout.String(), "abc")
	}
	// The id is released with the Start call.
	_, err := td.grpc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("x")}})
	wantCode(t, err, codes.NotFound)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	framework.Eventually(t, func(context.Context) error {
		if alive(pid) {
			return fmt.Errorf("process %d is still running", pid)
		}
		return nil
	})
}

func TestSignalReachesTheProcessGroup(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	s := start(t, ctx, td, &processv1.StartRequest{Config: cfgOf("sh", "-c", "sleep 300 & echo $!; wait")})
	s.waitStdout("\n")
	grandchild, err := strconv.Atoi(strings.TrimSpace(s.stdout.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: s.pid, Signal: processv1.Signal_SIGNAL_SIGTERM}); err != nil {
		t.Fatal(err)
	}
	if code := s.finish(); code != -1 {
		t.Errorf("exit code %d, want -1 (killed by a signal)", code)
	}
	waitGone(t, grandchild)
}

// TestDeadlineKillsTheProcessGroup: a call's deadline kills the command and its background
// children. The deadline only triggers the kill; if a loaded machine has not even started the
// child when it fires, the test retries with a longer one instead of asserting on speed.
func TestDeadlineKillsTheProcessGroup(t *testing.T) {
	td := startDaemon(t)
	pidFile := filepath.Join(td.root, "pid")
	for _, deadline := range []time.Duration{time.Second, 5 * time.Second, 20 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf("sh", "-c", "sleep 300 & echo $! > pid.tmp; mv pid.tmp pid; wait")})
		cancel()
		wantCode(t, err, codes.DeadlineExceeded)
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue // killed before it wrote the pid: try a longer deadline
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		td.assertHealthy(t)
		return
	}
	t.Fatal("the command never got as far as starting its child")
}

func TestPTY(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	s := start(t, ctx, td, &processv1.StartRequest{
		Config: cfgOf("sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty; stty size; read x; stty size; echo err >&2"),
		Pty:    &processv1.PTY{Cols: 80, Rows: 24},
	})
	s.waitStdout("24 80")
	if _, err := td.grpc.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: s.pid, Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := td.grpc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("go\n")}}); err != nil {
		t.Fatal(err)
	}
	if code := s.finish(); code != 0 {
		t.Fatalf("exit code %d, want 0; output %q", code, s.stdout.String())
	}
	out := s.stdout.String()
	for _, want := range []string{"is-a-tty", "24 80", "30 100", "err"} {
		if !strings.Contains(out, want) {
			t.Errorf("PTY output %q lacks %q (stderr is merged into stdout on a PTY)", out, want)
		}
	}
	for _, ev := range s.events {
		if strings.HasPrefix(ev, "err:") {
			t.Errorf("PTY process produced a separate stderr event %q", ev)
		}
	}
}

func TestPTYEOFEndsInput(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	s := start(t, ctx, td, &processv1.StartRequest{Config: cfgOf("sh", "-c", "echo ready; cat; echo done"), Pty: &processv1.PTY{}})
	s.waitStdout("ready")
	if _, err := td.grpc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: s.pid, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	if code := s.finish(); code != 0 || !strings.Contains(s.stdout.String(), "done") {
		t.Fatalf("exit %d output %q; want cat to see EOF and the shell to print done", code, s.stdout.String())
	}
}

// TestBadProcessInput sends every kind of bad request and proves the daemon still serves after each.
func TestBadProcessInput(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.MaxExecuteOutputBytes = 1024 })
	escape := "../.."
	running := start(t, framework.Context(t, 60*time.Second), td, &processv1.StartRequest{Config: cfgOf("sleep", "300")})
	cases := []struct {
		name string
		call func(ctx context.Context) error
		want codes.Code
	}{
		{"nil config", func(ctx context.Context) error {
			_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{})
			return err
		}, codes.InvalidArgument},
		{"empty command", func(ctx context.Context) error {
			_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf()})
			return err
		}, codes.InvalidArgument},
		{"command not found", func(ctx context.Context) error {
			_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf("no-such-command-xyz")})
			return err
		}, codes.NotFound},
		{"cwd escape", func(ctx context.Context) error {
			_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"pwd"}, Cwd: &escape}})
			return err
		}, codes.PermissionDenied},
		{"start cwd escape", func(ctx context.Context) error {
			stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"pwd"}, Cwd: &escape}})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, codes.PermissionDenied},
		{"output over the limit", func(ctx context.Context) error {
			_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf("sh", "-c", "yes | head -c 100000")})
			return err
		}, codes.ResourceExhausted},
		{"stdin of unknown id", func(ctx context.Context) error {
			_, err := td.grpc.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: 9999, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("x")}})
			return err
		}, codes.NotFound},
		{"signal to unknown id", func(ctx context.Context) error {
			_, err := td.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: 9999, Signal: processv1.Signal_SIGNAL_SIGTERM})
			return err
		}, codes.NotFound},
		{"resize unknown id", func(ctx context.Context) error {
			_, err := td.grpc.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: 9999, Cols: 1, Rows: 1})
			return err
		}, codes.NotFound},
		{"unspecified signal", func(ctx context.Context) error {
			_, err := td.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: running.pid})
			return err
		}, codes.InvalidArgument},
		{"unlisted signal number", func(ctx context.Context) error {
			_, err := td.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: running.pid, Signal: processv1.Signal(1)})
			return err
		}, codes.InvalidArgument},
		{"resize without a PTY", func(ctx context.Context) error {
			_, err := td.grpc.ResizeTTY(ctx, &processv1.ResizeTTYRequest{ProcessId: running.pid, Cols: 10, Rows: 10})
			return err
		}, codes.FailedPrecondition},
		{"pty too large", func(ctx context.Context) error {
			stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: cfgOf("true"), Pty: &processv1.PTY{Cols: 1 << 20, Rows: 1}})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.call(framework.Context(t, 30*time.Second)), tc.want)
			td.assertHealthy(t)
		})
	}
}

// TestClosedStreamKillsTheProcess closes a Start call mid-way: the process is killed, its id
// released, and the daemon keeps serving.
func TestClosedStreamKillsTheProcess(t *testing.T) {
	td := startDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := start(t, ctx, td, &processv1.StartRequest{Config: cfgOf("sh", "-c", "echo $$; exec sleep 300")})
	s.waitStdout("\n")
	pid, err := strconv.Atoi(strings.TrimSpace(s.stdout.String()))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	waitGone(t, pid)
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := td.grpc.SendSignal(ctx, &processv1.SendSignalRequest{ProcessId: s.pid, Signal: processv1.Signal_SIGNAL_SIGTERM})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("SendSignal to a closed stream's id = %v, want NotFound", err)
		}
		return nil
	})
	td.assertHealthy(t)
}

func TestGRPCTokenRequired(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Token = "s3cret" })
	ctx := framework.Context(t, 30*time.Second)
	req := &processv1.ExecuteRequest{Config: cfgOf("true")}
	_, err := td.grpc.Execute(ctx, req)
	wantCode(t, err, codes.Unauthenticated)
	_, err = td.grpc.Execute(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), req)
	wantCode(t, err, codes.Unauthenticated)
	stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: cfgOf("true")})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.Unauthenticated)
	if _, err := td.grpc.Execute(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret"), req); err != nil {
		t.Fatalf("Execute with the token: %v", err)
	}
}

// TestReflectionListsTheService: tools such as grpcurl discover the API through reflection.
func TestReflectionListsTheService(t *testing.T) {
	td := startDaemon(t)
	stream, err := reflectionpb.NewServerReflectionClient(td.conn).ServerReflectionInfo(framework.Context(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !contains(names, "process.v1.ProcessService") {
		t.Errorf("reflection lists %q, want process.v1.ProcessService among them", names)
	}
}
