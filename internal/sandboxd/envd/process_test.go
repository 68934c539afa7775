package envd

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
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
