package envd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/test/framework"
)

// run starts argv and collects its output and end event.
func (f *fixture) run(t *testing.T, req *pb.StartRequest) (string, string, *pb.ProcessEvent_EndEvent) {
	t.Helper()
	stream, err := f.proc.Start(testContext(t), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var stdout, stderr strings.Builder
	first := true
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if first && ev.GetStart() == nil {
			t.Fatalf("first event %v, want start", ev)
		}
		first = false
		switch {
		case ev.GetData() != nil:
			stdout.Write(ev.GetData().GetStdout())
			stdout.Write(ev.GetData().GetPty())
			stderr.Write(ev.GetData().GetStderr())
		case ev.GetEnd() != nil:
			return stdout.String(), stderr.String(), ev.GetEnd()
		}
	}
	t.Fatalf("stream ended without an end event: %v", stream.Err())
	return "", "", nil
}

func bash(script string) *pb.ProcessConfig {
	return &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", script}}
}

func TestStartStdinFalseReadsEOF(t *testing.T) {
	f := newFixture(t)
	no := false
	out, _, end := f.run(t, &pb.StartRequest{Process: bash("cat; echo eof"), Stdin: &no})
	if out != "eof\n" || end.GetExitCode() != 0 || !end.GetExited() {
		t.Fatalf("out %q end %v", out, end)
	}
}

// startBackground starts a command, reads its start event and returns the pid and the stream.
func (f *fixture) startBackground(t *testing.T, ctx context.Context, req *pb.StartRequest, header ...string) (uint32, *connect.ServerStreamForClient[pb.StartResponse]) {
	t.Helper()
	r := connect.NewRequest(req)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header().Set(header[i], header[i+1])
	}
	stream, err := f.proc.Start(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", stream.Err())
	}
	return stream.Msg().GetEvent().GetStart().GetPid(), stream
}

func (f *fixture) listed(t *testing.T, pid uint32) bool {
	t.Helper()
	res, err := f.proc.List(testContext(t), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Msg.GetProcesses() {
		if p.GetPid() == pid {
			return true
		}
	}
	return false
}

// TestProcessOutlivesItsStream: dropping the Start stream leaves the process running and
// addressable (by pid and tag); Connect follows it to its end.
func TestProcessOutlivesItsStream(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(testContext(t))
	yes := true
	pid, stream := f.startBackground(t, ctx, &pb.StartRequest{Process: bash("read line; echo got $line"), Stdin: &yes, Tag: ptr("reader")})
	cancel()
	stream.Close()
	if !f.listed(t, pid) {
		t.Fatal("the process is gone after its client dropped the stream")
	}
	follow, err := f.proc.Connect(testContext(t), connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "reader"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !follow.Receive() || follow.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("Connect's first event %v, want start with pid %d", follow.Msg(), pid)
	}
	if _, err := f.proc.SendInput(testContext(t), connect.NewRequest(&pb.SendInputRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}},
		Input:   &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x\n")}},
	})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for follow.Receive() {
		out.Write(follow.Msg().GetEvent().GetData().GetStdout())
		if end := follow.Msg().GetEvent().GetEnd(); end != nil && (end.GetExitCode() != 0 || out.String() != "got x\n") {
			t.Fatalf("end %v output %q", end, out.String())
		}
	}
	if out.String() != "got x\n" {
		t.Fatalf("output %q (%v)", out.String(), follow.Err())
	}
}

// TestConnectTimeoutKillsTheProcess: the Connect-Timeout-Ms of Start (which the client derives
// from its deadline) bounds the process's life, although a dropped stream does not.
func TestConnectTimeoutKillsTheProcess(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(testContext(t), 500*time.Millisecond)
	defer cancel()
	pid, stream := f.startBackground(t, ctx, &pb.StartRequest{Process: bash("sleep 300")})
	for stream.Receive() {
	}
	if stream.Err() == nil {
		t.Fatal("the stream of a process killed at its deadline ended without an error")
	}
	framework.EventuallyWithin(t, 30*time.Second, func(context.Context) error {
		if f.listed(t, pid) || f.procs.Running() != 0 {
			return errors.New("the process outlived its timeout")
		}
		return nil
	})
}

func TestKillAndSignals(t *testing.T) {
	f := newFixture(t)
	pid, stream := f.startBackground(t, testContext(t), &pb.StartRequest{Process: bash("sleep 300")})
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := f.proc.SendSignal(testContext(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("SIGNAL_UNSPECIFIED: %v, want invalid_argument", err)
	}
	if _, err := f.proc.SendSignal(testContext(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	var end *pb.ProcessEvent_EndEvent
	for stream.Receive() {
		if e := stream.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if end == nil || end.GetExitCode() != -1 || end.GetExited() || !strings.Contains(end.GetError(), "killed") {
		t.Fatalf("end after SIGKILL: %v", end)
	}
	if _, err := f.proc.SendSignal(testContext(t), connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("signal after the end: %v, want not_found (the SDK's kill() returns false)", err)
	}
}

func TestPTYResize(t *testing.T) {
	f := newFixture(t)
	pid, stream := f.startBackground(t, testContext(t), &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "read x; stty size"}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	})
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := f.proc.Update(testContext(t), connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.proc.SendInput(testContext(t), connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("\n")}}})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for stream.Receive() {
		out.Write(stream.Msg().GetEvent().GetData().GetPty())
	}
	if !strings.Contains(out.String(), "40 100") {
		t.Fatalf("pty output %q, want the new size 40 100", out.String())
	}
}

// TestKeepalives: a stream that asked for Keepalive-Ping-Interval gets keepalive events while the
// process is quiet.
func TestKeepalives(t *testing.T) {
	f := newFixture(t)
	yes := true
	pid, stream := f.startBackground(t, testContext(t), &pb.StartRequest{Process: bash("read x"), Stdin: &yes}, "Keepalive-Ping-Interval", "1")
	for stream.Receive() {
		if stream.Msg().GetEvent().GetKeepalive() != nil {
			break
		}
	}
	if _, err := f.proc.CloseStdin(testContext(t), connect.NewRequest(&pb.CloseStdinRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}})); err != nil {
		t.Fatalf("no keepalive before the stream ended (%v); CloseStdin: %v", stream.Err(), err)
	}
	for stream.Receive() {
		if stream.Msg().GetEvent().GetEnd() != nil {
			return
		}
	}
	t.Fatalf("no end event after CloseStdin: %v", stream.Err())
}
