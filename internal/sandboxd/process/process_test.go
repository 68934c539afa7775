package process

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMergeEnv(t *testing.T) {
	cases := []struct {
		name   string
		base   []string
		layers []map[string]string
		want   []string
	}{
		{name: "no layers", base: []string{"A=1", "B=2"}, want: []string{"A=1", "B=2"}},
		{name: "later layer wins in place", base: []string{"A=1", "B=2"},
			layers: []map[string]string{{"A": "claim"}, {"A": "request", "C": "3"}},
			want:   []string{"A=request", "B=2", "C=3"}},
		{name: "new names sorted per layer", layers: []map[string]string{{"Z": "z", "M": "m"}}, want: []string{"M=m", "Z=z"}},
		{name: "value with equals", base: []string{"A=x=y"}, layers: []map[string]string{{"B": "p=q"}}, want: []string{"A=x=y", "B=p=q"}},
		{name: "nil layer", base: []string{"A=1"}, layers: []map[string]string{nil}, want: []string{"A=1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MergeEnv(tc.base, tc.layers...)); diff != "" {
				t.Errorf("MergeEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func spec(argv ...string) Spec {
	return Spec{Command: argv, Env: os.Environ(), Dir: os.TempDir()}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRun(t *testing.T) {
	m := NewManager(0)
	res, err := m.Run(ctx(t), spec("sh", "-c", "printf out; printf err >&2; exit 7"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{ExitCode: 7, Stdout: []byte("out"), Stderr: []byte("err")}, res); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	if n := m.Running(); n != 0 {
		t.Errorf("%d processes still registered after Run", n)
	}
}

func TestRunOutputLimitKillsTheProcess(t *testing.T) {
	_, err := NewManager(16).Run(ctx(t), spec("yes"), 1000)
	var overflow *ErrOutputLimit
	if !errors.As(err, &overflow) || overflow.Stream != "stdout" {
		t.Fatalf("Run(yes) error = %v, want stdout over the limit", err)
	}
}

func TestSignalAfterExitIsANoOp(t *testing.T) {
	m := NewManager(0)
	p, err := m.Start(ctx(t), spec("true"))
	if err != nil {
		t.Fatal(err)
	}
	for range p.Output() {
	}
	if code := p.Wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("Signal after exit = %v, want nil", err)
	}
	if err := p.WriteStdin([]byte("x")); err == nil {
		t.Error("WriteStdin after exit succeeded, want an error")
	}
	if err := p.Resize(Size{Cols: 1, Rows: 1}); !errors.Is(err, ErrNoTTY) {
		t.Errorf("Resize without PTY = %v, want ErrNoTTY", err)
	}
}

// TestBackgroundChildDoesNotHoldTheStream: a grandchild that keeps stdout open must not keep
// the process from finishing; its output is cut off after the drain grace period.
func TestBackgroundChildDoesNotHoldTheStream(t *testing.T) {
	m := NewManager(0)
	p, err := m.Start(ctx(t), spec("sh", "-c", "echo parent; sleep 300 &"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for c := range p.Output() {
		out.Write(c.Data)
	}
	if code := p.Wait(); code != 0 || out.String() != "parent\n" {
		t.Fatalf("exit %d output %q, want 0 and parent", code, out.String())
	}
	// The manager's shutdown still reaches the detached group leader's survivors.
	m.Shutdown(context.Background())
}

func TestStartErrors(t *testing.T) {
	m := NewManager(0)
	for _, argv := range [][]string{nil, {""}, {"/no/such/binary"}} {
		if _, err := m.Start(ctx(t), spec(argv...)); err == nil {
			t.Errorf("Start(%q) succeeded, want an error", argv)
		}
	}
	if n := m.Running(); n != 0 {
		t.Errorf("%d processes registered after failed starts", n)
	}
}

func TestShutdownStopsRegisteredProcesses(t *testing.T) {
	m := NewManager(0)
	p, err := m.Start(ctx(t), spec("sh", "-c", "trap '' TERM; echo ready; sleep 300"))
	if err != nil {
		t.Fatal(err)
	}
	first := <-p.Output() // the trap is installed once "ready" is printed
	if string(first.Data) != "ready\n" {
		t.Fatalf("first output %q", first.Data)
	}
	go func() {
		for range p.Output() {
		}
	}()
	m.Shutdown(context.Background()) // SIGTERM is ignored, so SIGKILL must follow
	if code := p.Wait(); code != -1 {
		t.Errorf("exit %d, want -1 (killed)", code)
	}
}
