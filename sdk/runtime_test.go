package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// runtimeUnderTest is the sandboxd at PADDOCK_SANDBOXD_URL (its legacy API port, e.g.
// http://127.0.0.1:8888; PADDOCK_SANDBOXD_TOKEN for --token) when set, else the real sandboxd
// daemon served in-process on loopback.
func runtimeUnderTest(t *testing.T) *Runtime {
	t.Helper()
	e := Endpoint{URL: os.Getenv("PADDOCK_SANDBOXD_URL"), Token: os.Getenv("PADDOCK_SANDBOXD_TOKEN")}
	if e.URL == "" {
		d := startSandboxd(t)
		e.URL, e.GRPCAddr = d.legacyURL, d.grpcAddr
	} else {
		e.GRPCAddr = os.Getenv("PADDOCK_SANDBOXD_GRPC") // host:port; Stream is skipped without it
	}
	rt, err := NewRuntime(e)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// sandboxdAddrs are where an in-process sandboxd serves.
type sandboxdAddrs struct {
	legacyURL, restURL, grpcAddr string
	root                         string
}

// startSandboxd serves the real daemon on a fresh root until the test ends and returns the base
// URLs of its legacy and REST APIs, its gRPC address and its root directory.
func startSandboxd(t testing.TB) sandboxdAddrs {
	t.Helper()
	var ls server.Listeners
	var err error
	for _, l := range []*net.Listener{&ls.GRPC, &ls.REST, &ls.Legacy} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	root := sandboxdtest.Serve(t, ls)
	return sandboxdAddrs{legacyURL: "http://" + ls.Legacy.Addr().String(), restURL: "http://" + ls.REST.Addr().String(),
		grpcAddr: ls.GRPC.Addr().String(), root: root}
}

func TestRuntimeStream(t *testing.T) {
	rt := runtimeUnderTest(t)
	if rt.grpcAddr == "" {
		t.Skip("PADDOCK_SANDBOXD_GRPC is not set")
	}
	var stdout, stderr strings.Builder
	code, err := rt.Stream(context.Background(), []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{3, "out\n", "err\n"}, []any{code, stdout.String(), stderr.String()}); diff != "" {
		t.Errorf("Stream (exit, stdout, stderr) (-want +got):\n%s", diff)
	}
	if _, err := rt.Stream(context.Background(), []string{"no-such-program-xyz"}, &stdout, &stderr); err == nil {
		t.Error("Stream of a missing program succeeded, want the daemon's NOT_FOUND error")
	}
	noGRPC, err := NewRuntime(Endpoint{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noGRPC.Stream(context.Background(), []string{"true"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "GRPCAddr") {
		t.Errorf("Stream without GRPCAddr = %v, want an error naming Endpoint.GRPCAddr", err)
	}
}

func TestRuntimeRunAndFiles(t *testing.T) {
	rt := runtimeUnderTest(t)
	ctx := context.Background()
	dir := fmt.Sprintf("sdk-test-%d", time.Now().UnixNano()) // unique on a shared real daemon
	if err := rt.WriteFile(ctx, dir+"/sub/hello.txt", []byte("hi there")); err != nil {
		t.Fatal(err)
	}
	got, err := rt.ReadFile(ctx, dir+"/sub/hello.txt")
	if err != nil || string(got) != "hi there" {
		t.Fatalf("ReadFile = %q, %v; want %q", got, err, "hi there")
	}
	entries, err := rt.ListFiles(ctx, dir+"/sub")
	if err != nil {
		t.Fatal(err)
	}
	type brief struct {
		Name  string
		Size  int64
		IsDir bool
	}
	var names []brief
	for _, e := range entries {
		names = append(names, brief{e.Name, e.Size, e.IsDir})
		if e.ModTime.IsZero() {
			t.Errorf("entry %q has no modification time", e.Name)
		}
	}
	if diff := cmp.Diff([]brief{{"hello.txt", 8, false}}, names); diff != "" {
		t.Errorf("ListFiles(sub) (-want +got):\n%s", diff)
	}
	if entries, err = rt.ListFiles(ctx, dir+"/sub/.."); err != nil || len(entries) != 1 || !entries[0].IsDir {
		t.Errorf("ListFiles(dir) = %+v, %v; want the one directory sub", entries, err)
	}
	root, err := rt.ListFiles(ctx, ".")
	if err != nil || !slices.ContainsFunc(root, func(e FileEntry) bool { return e.Name == dir && e.IsDir }) {
		t.Errorf("ListFiles(.) = %+v, %v; want it to hold the directory %s", root, err, dir)
	}
	if err := rt.WriteFile(ctx, dir+"/odd name%.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{dir + "/sub/hello.txt": true, dir + "/missing": false, dir + "/odd name%.txt": true} {
		if ok, err := rt.Exists(ctx, path); err != nil || ok != want {
			t.Errorf("Exists(%q) = %v, %v; want %v", path, ok, err, want)
		}
	}

	res, err := rt.Run(ctx, "cat "+dir+"/sub/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Result{Stdout: "hi there", ExitCode: 0}, res); diff != "" {
		t.Errorf("Run(cat) (-want +got):\n%s", diff)
	}
	if res, err = rt.Run(ctx, "ls "+dir+"/missing"); err != nil || res.ExitCode == 0 || res.Stderr == "" {
		t.Errorf("Run(ls missing) = %+v, %v; want a non-zero exit code and stderr", res, err)
	}

	_, err = rt.ReadFile(ctx, dir+"/missing")
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Errorf("ReadFile(missing) = %v, want an *HTTPError with 404", err)
	}
}

func TestRuntimeRouterHeaders(t *testing.T) {
	tests := []struct {
		name string
		e    Endpoint
		want http.Header
	}{
		{"router", Endpoint{Sandbox: "sb-1", Namespace: "team", Port: 9000, Token: "t0k"},
			http.Header{"X-Sandbox-Id": {"sb-1"}, "X-Sandbox-Namespace": {"team"}, "X-Sandbox-Port": {"9000"}, "Authorization": {"Bearer t0k"}}},
		{"router defaults", Endpoint{Sandbox: "sb-1"},
			http.Header{"X-Sandbox-Id": {"sb-1"}, "X-Sandbox-Namespace": {"default"}, "X-Sandbox-Port": {"8888"}}},
		{"direct", Endpoint{}, http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newProtocolFixture(t)
			tt.e.URL = srv.URL
			rt, err := NewRuntime(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.Exists(context.Background(), "x"); err != nil {
				t.Fatal(err)
			}
			got := http.Header{}
			for _, k := range []string{"X-Sandbox-Id", "X-Sandbox-Namespace", "X-Sandbox-Port", "Authorization"} {
				if v := f.requests()[0].Header.Values(k); v != nil {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeRetries(t *testing.T) {
	tests := []struct {
		name         string
		failStatus   int
		failTimes    int
		call         func(*Runtime) error
		wantRequests int
		wantErr      bool
	}{
		{"read retried through 503", 503, 2, func(r *Runtime) error { _, err := r.ReadFile(context.Background(), "f"); return err }, 3, false},
		{"write retried through 502", 502, 1, func(r *Runtime) error { return r.WriteFile(context.Background(), "f", []byte("x")) }, 2, false},
		{"read not retried on 404", 404, 5, func(r *Runtime) error { _, err := r.ReadFile(context.Background(), "f"); return err }, 1, true},
		{"run not retried on 503", 503, 1, func(r *Runtime) error { _, err := r.Run(context.Background(), "true"); return err }, 1, true},
		{"read gives up", 503, 99, func(r *Runtime) error { _, err := r.ReadFile(context.Background(), "f"); return err }, maxAttempts, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newProtocolFixture(t)
			if err := os.WriteFile(f.root+"/f", []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			failed := 0
			f.fail = func(*http.Request) (int, bool) {
				failed++
				return tt.failStatus, failed <= tt.failTimes
			}
			rt, err := NewRuntime(Endpoint{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			rt.sleep = func(context.Context, time.Duration) error { return nil }
			err = tt.call(rt)
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := len(f.requests()); got != tt.wantRequests {
				t.Errorf("requests = %d, want %d", got, tt.wantRequests)
			}
		})
	}
}

// TestRuntimeRetriesRefusedRun: a refused connection never reached the runtime, so even a
// command is retried, with growing pauses, until the attempts run out.
func TestRuntimeRetriesRefusedRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rt, err := NewRuntime(Endpoint{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	var pauses []time.Duration
	rt.sleep = func(_ context.Context, d time.Duration) error { pauses = append(pauses, d); return nil }
	_, err = rt.Run(context.Background(), "true")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want connection refused", err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	if diff := cmp.Diff(want, pauses); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

func TestRetryable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name       string
		idempotent bool
		status     int
		err        error
		want       bool
	}{
		{"refused command", false, 0, refused, true},
		{"refused read", true, 0, refused, true},
		{"reset command", false, 0, reset, false},
		{"reset read", true, 0, reset, true},
		{"cancelled read", true, 0, context.Canceled, false},
		{"deadline read", true, 0, context.DeadlineExceeded, false},
		{"503 read", true, 503, errors.New("x"), true},
		{"502 command", false, 502, errors.New("x"), false},
		{"500 read", true, 500, errors.New("x"), false},
		{"404 read", true, 404, errors.New("x"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.idempotent, tt.status, tt.err); got != tt.want {
			t.Errorf("%s: retryable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for attempt := 1; attempt <= 7; attempt++ {
		got = append(got, backoff(attempt))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 2 * time.Second, 2 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
}

func TestNewRuntimeRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "198.18.0.1:8888", "ftp://x", "http://"} {
		if _, err := NewRuntime(Endpoint{URL: u}); err == nil {
			t.Errorf("NewRuntime(%q) succeeded, want an error naming Endpoint.URL", u)
		}
	}
}

// TestSandboxRuntimeStrategy: with a router URL the Sandbox's Runtime routes by headers; without
// one it goes to the first pod IP on the runtime port, and says what to do when there is none.
func TestSandboxRuntimeStrategy(t *testing.T) {
	f, srv := newProtocolFixture(t)
	routed := &Sandbox{c: &Client{opts: Options{RouterURL: srv.URL, RuntimePort: 8888}}, namespace: "team", claim: "c", sandbox: "sb-7"}
	rt, err := routed.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exists(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	h := f.requests()[0].Header
	if h.Get(HeaderSandboxID) != "sb-7" || h.Get(HeaderSandboxNamespace) != "team" || h.Get(HeaderSandboxPort) != "8888" {
		t.Errorf("router headers = %v, want sandbox sb-7 in team on port 8888", h)
	}

	// No credentials Secret (credentials off): no Authorization header either.
	direct := &Sandbox{c: &Client{kube: fake.NewClientBuilder().Build(), opts: Options{RuntimePort: 9000, GRPCPort: 9001}}, namespace: "team", sandbox: "sb-7",
		podIPs: []string{"fd00::7", "198.18.0.7"}}
	if rt, err = direct.Runtime(); err != nil || rt.base.String() != "http://[fd00::7]:9000" || rt.grpcAddr != "[fd00::7]:9001" || len(rt.headers) != 0 {
		t.Errorf("direct Runtime = %v, %v; want http://[fd00::7]:9000 and gRPC [fd00::7]:9001 without router headers", rt, err)
	}
	noIP := &Sandbox{c: &Client{opts: Options{RuntimePort: 8888}}, namespace: "team", sandbox: "sb-7"}
	if _, err := noIP.Runtime(); err == nil {
		t.Error("Runtime without a pod IP succeeded, want an error pointing at Options.RouterURL")
	}
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine and a polling reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRuntimeExecStdin(t *testing.T) {
	rt := runtimeUnderTest(t)
	if rt.grpcAddr == "" {
		t.Skip("PADDOCK_SANDBOXD_GRPC is not set")
	}
	ctx := context.Background()
	data := make([]byte, 200_000) // several WriteStdin chunks, every byte value
	for i := range data {
		data[i] = byte(i * 31)
	}
	var stdout, stderr bytes.Buffer
	code, err := rt.Exec(ctx, ExecOptions{Argv: []string{"cat"}, Stdin: bytes.NewReader(data), Stdout: &stdout, Stderr: &stderr})
	if err != nil || code != 0 || !bytes.Equal(stdout.Bytes(), data) {
		t.Errorf("cat of %d bytes: code %d, %v, %d bytes back (equal %v)", len(data), code, err, stdout.Len(), bytes.Equal(stdout.Bytes(), data))
	}
	stdout.Reset()
	code, err = rt.Exec(ctx, ExecOptions{Argv: []string{"sh", "-c", "read x; echo got $x; exit 4"}, Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
	if diff := cmp.Diff([]any{4, "got hello\n", nil}, []any{code, stdout.String(), err}, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("read from stdin (code, stdout, err) (-want +got):\n%s", diff)
	}
	// Without Stdin the input is closed at once, so a reader does not hang.
	stdout.Reset()
	if code, err = rt.Exec(ctx, ExecOptions{Argv: []string{"cat"}, Stdout: &stdout, Stderr: &stderr}); err != nil || code != 0 || stdout.Len() != 0 {
		t.Errorf("cat without stdin: code %d, %v, stdout %q; want it to end at once with nothing", code, err, stdout.String())
	}
	if _, err := rt.Exec(ctx, ExecOptions{Argv: []string{"true"}}); err == nil {
		t.Error("Exec without Stdout succeeded, want an error naming ExecOptions.Stdout")
	}
}

// TestRuntimeExecCwdAndEnv: the command starts in Cwd with Env added, and a Cwd outside the
// sandbox root is refused by sandboxd.
func TestRuntimeExecCwdAndEnv(t *testing.T) {
	rt := runtimeUnderTest(t)
	if rt.grpcAddr == "" {
		t.Skip("PADDOCK_SANDBOXD_GRPC is not set")
	}
	ctx := context.Background()
	if _, err := rt.Run(ctx, "mkdir -p work/dir"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code, err := rt.Exec(ctx, ExecOptions{Argv: []string{"sh", "-c", `echo "$MODE $(basename "$PWD")"`}, Stdout: &stdout, Stderr: &stderr,
		Cwd: "work/dir", Env: map[string]string{"MODE": "fast"}})
	if err != nil || code != 0 || stdout.String() != "fast dir\n" {
		t.Errorf("Exec with Cwd and Env: code %d, %v, stdout %q, stderr %q; want \"fast dir\\n\"", code, err, stdout.String(), stderr.String())
	}
	if _, err := rt.Exec(ctx, ExecOptions{Argv: []string{"pwd"}, Stdout: &stdout, Stderr: &stderr, Cwd: "../.."}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Exec with Cwd ../..: %v, want PermissionDenied", err)
	}
}

// TestRuntimeExecTTY runs a shell loop on a pseudo-terminal: it sees the size asked for, then
// the size after a resize, and its input echoed like a terminal's.
func TestRuntimeExecTTY(t *testing.T) {
	rt := runtimeUnderTest(t)
	if rt.grpcAddr == "" {
		t.Skip("PADDOCK_SANDBOXD_GRPC is not set")
	}
	stdinR, stdinW := io.Pipe()
	resize := make(chan TerminalSize, 1)
	var out syncBuffer
	done := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = rt.Exec(context.Background(), ExecOptions{Argv: []string{"sh", "-c", `while read line; do [ "$line" = quit ] && exit 5; echo "size $(stty size)"; done`},
			Stdin: stdinR, Stdout: &out, TTY: &TerminalSize{Cols: 100, Rows: 30}, Resize: resize})
		done <- err
	}()
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("terminal output %q never showed %q", out.String(), want)
			}
			if _, err := stdinW.Write([]byte("x\n")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // pace of the poll, not synchronisation
		}
	}
	waitFor("size 30 100")
	resize <- TerminalSize{Cols: 120, Rows: 40}
	waitFor("size 40 120")
	if _, err := stdinW.Write([]byte("quit\n")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || code != 5 {
		t.Errorf("Exec on a TTY = %d, %v; want exit code 5", code, err)
	}
	if !strings.Contains(out.String(), "x\r\n") {
		t.Errorf("terminal output %q does not echo the input with CRLF like a terminal", out.String())
	}
}
