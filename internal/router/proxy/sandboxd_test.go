package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/metrics"
	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// sandboxdBehindRouter serves a real sandboxd (REST and legacy APIs) and a router in front of
// it, all on loopback. The router finds the daemon through a Sandbox whose pod IP is 127.0.0.1.
type sandboxdBehindRouter struct {
	router               string // the router's base URL
	rest, legacy         string // the daemon's base URLs
	restPort, legacyPort string
}

func startSandboxdBehindRouter(t testing.TB) *sandboxdBehindRouter {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ls := server.Listeners{REST: listen(), Legacy: listen()}
	sandboxdtest.Serve(t, ls)
	_, restPort := splitPort(ls.REST.Addr().String())
	_, legacyPort := splitPort(ls.Legacy.Addr().String())
	h := New(Config{
		Resolver:   &resolve.Resolver{Lookup: staticLookup{sandbox("127.0.0.1", restPort, legacyPort)}, Policy: loopback},
		Authorizer: authz.AllowAll{}, Metrics: metrics.New(prometheus.NewRegistry()), Log: logr.Discard(),
		ProxyTimeout: time.Minute, Transport: NewTransport(loopback, 5*time.Second, 30*time.Second, 0),
	})
	rt := httptest.NewServer(h)
	t.Cleanup(rt.Close)
	return &sandboxdBehindRouter{router: rt.URL, rest: "http://" + ls.REST.Addr().String(), legacy: "http://" + ls.Legacy.Addr().String(),
		restPort: restPort, legacyPort: legacyPort}
}

// routed is a request to the daemon's port through the router.
func (s *sandboxdBehindRouter) routed(method, path, port, body string) *http.Request {
	r, _ := http.NewRequest(method, s.router+path, strings.NewReader(body))
	r.Header.Set("X-Sandbox-ID", "bench")
	r.Header.Set("X-Sandbox-Namespace", "default")
	r.Header.Set("X-Sandbox-Port", port)
	return r
}

// TestSandboxdExecStreamsThroughRouter proves the router passes each event of a process stream
// on as it comes: the command prints, then blocks on stdin until the test closes it.
func TestSandboxdExecStreamsThroughRouter(t *testing.T) {
	s := startSandboxdBehindRouter(t)
	resp, err := http.DefaultClient.Do(s.routed(http.MethodPost, "/v1/processes", s.restPort,
		`{"config":{"command":["sh","-c","echo first; read line; echo \"got $line\""]}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	next := func() *processv1.StartResponse {
		t.Helper()
		if !events.Scan() {
			t.Fatalf("stream through the router ended early (status %d): %v", resp.StatusCode, events.Err())
		}
		ev := &processv1.StartResponse{}
		if err := protojson.Unmarshal(events.Bytes(), ev); err != nil {
			t.Fatalf("event %q: %v", events.Text(), err)
		}
		return ev
	}
	id := next().GetInit().GetProcessId()
	if got := string(next().GetStdout()); got != "first\n" {
		t.Fatalf("first chunk = %q, want \"first\\n\" while the process still waits", got)
	}
	stdin, err := http.DefaultClient.Do(s.routed(http.MethodPost, fmt.Sprintf("/v1/processes/%d/stdin?eof=true", id), s.restPort, "x\n"))
	if err != nil {
		t.Fatal(err)
	}
	stdin.Body.Close()
	if stdin.StatusCode != http.StatusNoContent {
		t.Fatalf("stdin through the router = %d, want 204", stdin.StatusCode)
	}
	var out strings.Builder
	for {
		ev := next()
		out.Write(ev.GetStdout())
		if exit := ev.GetExit(); exit != nil {
			if out.String() != "got x\n" || exit.GetExitCode() != 0 {
				t.Errorf("rest of the stream = %q, exit %d; want \"got x\\n\", 0", out.String(), exit.GetExitCode())
			}
			return
		}
	}
}

// BenchmarkSandboxdThroughRouter measures requests to an in-process sandboxd, directly and
// through the router, on loopback: the difference of the two ns/op is what the router adds.
// health is a bare HTTP round trip; execute-true is the legacy POST /execute of `true` that the
// SDK's Run sends (fork/exec included).
func BenchmarkSandboxdThroughRouter(b *testing.B) {
	s := startSandboxdBehindRouter(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.Cleanup(client.CloseIdleConnections)
	health := func(direct bool) *http.Request {
		if direct {
			r, _ := http.NewRequest(http.MethodGet, s.rest+"/v1/health", nil)
			return r
		}
		return s.routed(http.MethodGet, "/v1/health", s.restPort, "")
	}
	execute := func(direct bool) *http.Request {
		const body = `{"command":"true"}`
		if direct {
			r, _ := http.NewRequest(http.MethodPost, s.legacy+"/execute", strings.NewReader(body))
			return r
		}
		return s.routed(http.MethodPost, "/execute", s.legacyPort, body)
	}
	for _, op := range []struct {
		name string
		req  func(direct bool) *http.Request
	}{{"health", health}, {"execute-true", execute}} {
		for _, direct := range []bool{true, false} {
			name := op.name + "/router"
			if direct {
				name = op.name + "/direct"
			}
			b.Run(name, func(b *testing.B) {
				roundTrip(b, client, op.req(direct)) // warm the connections
				for b.Loop() {
					roundTrip(b, client, op.req(direct))
				}
			})
		}
	}
}
