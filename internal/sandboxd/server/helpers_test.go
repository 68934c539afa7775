package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/test/framework"
)

// testDaemon is a real sandboxd serving on 127.0.0.1 ports.
type testDaemon struct {
	d      *Daemon
	rest   string // http://127.0.0.1:port
	legacy string
	grpc   processv1.ProcessServiceClient
	// grpcAddr is host:port of the gRPC listener.
	grpcAddr string
	conn     *grpc.ClientConn
	root     string
}

// startDaemon serves a daemon on a fresh root until the test ends; mutate adjusts the config.
// Without a mutation that sets Token the daemon allows unauthenticated calls, so tests of other
// behaviour need no credentials; auth_test.go covers the default.
func startDaemon(t testing.TB, mutate ...func(*Config)) *testDaemon {
	t.Helper()
	cfg := Config{
		RootDir:         t.TempDir(),
		Environ:         os.Environ(),
		ShutdownTimeout: 5 * time.Second,
	}
	cfg.AllowUnauthenticated = true
	for _, m := range mutate {
		m(&cfg)
	}
	if cfg.Token != "" {
		cfg.AllowUnauthenticated = false
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ls := Listeners{GRPC: listen(), REST: listen(), Legacy: listen()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	conn, err := grpc.NewClient(ls.GRPC.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return &testDaemon{
		d:        d,
		rest:     "http://" + ls.REST.Addr().String(),
		legacy:   "http://" + ls.Legacy.Addr().String(),
		grpc:     processv1.NewProcessServiceClient(conn),
		grpcAddr: ls.GRPC.Addr().String(),
		conn:     conn,
		root:     d.Root(),
	}
}

// do sends one HTTP request and returns the status and body.
func do(t testing.TB, method, url string, body io.Reader, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// assertHealthy proves the daemon still serves both APIs after whatever the test did to it.
func (td *testDaemon) assertHealthy(t testing.TB) {
	t.Helper()
	if status, body := do(t, http.MethodGet, td.rest+"/v1/health", nil); status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("health after bad input = %d %s, want 200 ok", status, body)
	}
	res, err := td.grpc.Execute(framework.Context(t, 30*time.Second), &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"echo", "alive"}}})
	if err != nil || string(res.GetStdout()) != "alive\n" {
		t.Fatalf("Execute after bad input = %v, %v; want stdout alive", res, err)
	}
}
