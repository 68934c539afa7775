package claimsettings

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// daemon is a real sandboxd serving one pool member, on loopback.
type daemon struct {
	rest, legacy string
	// token and control are the member's sandbox and control tokens as this sandboxd knows them.
	token, control string
	// Guarded by registry.mu: resolutions counts address lookups, failResolutions makes the next
	// ones fail.
	resolutions, failResolutions int

	mu sync.Mutex
	// onPut runs when a claim-settings PUT arrives, before sandboxd handles it.
	onPut func()
	puts  int
	// putTime is how long sandboxd took to answer the last claim-settings PUT.
	putTime time.Duration
	// loseAnswers makes sandboxd apply claim-settings PUTs and then cut the connection without
	// answering, as an answer lost on a loaded network looks to the controller.
	loseAnswers bool
}

// startDaemon runs sandboxd for member as the Sandbox controller configures it: the tokens
// derived from key (the controller's, unless a test wants them not to match) and, when locked,
// SANDBOXD_REQUIRE_CLAIM.
func startDaemon(t *testing.T, member *agentsv1beta1.Sandbox, key []byte, locked bool) *daemon {
	t.Helper()
	td := &daemon{token: credentials.SandboxToken(key, member.Namespace, member.Name, member.UID),
		control: credentials.ControlToken(key, member.Namespace, member.Name, member.UID)}
	d, err := server.New(server.Config{RootDir: t.TempDir(), Token: td.token, ControlToken: td.control, RequireClaim: locked,
		Environ: os.Environ(), ShutdownTimeout: 5 * time.Second})
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
	rest, legacy := listen(), listen()
	td.rest, td.legacy = rest.Addr().String(), legacy.Addr().String()
	// sandboxd's own REST handler, behind a hook that sees each claim-settings PUT first.
	restHandler := d.RESTHandler()
	restServer := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/v1/claim-settings" {
			td.mu.Lock()
			td.puts++
			onPut := td.onPut
			td.mu.Unlock()
			if onPut != nil {
				onPut()
			}
			td.mu.Lock()
			lose := td.loseAnswers
			td.mu.Unlock()
			if lose {
				restHandler.ServeHTTP(discard{header: http.Header{}}, r)
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					_ = conn.Close()
				}
				return
			}
			start := time.Now()
			restHandler.ServeHTTP(w, r)
			td.mu.Lock()
			td.putTime = time.Since(start)
			td.mu.Unlock()
			return
		}
		restHandler.ServeHTTP(w, r)
	})}
	go func() { _ = restServer.Serve(rest) }()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, server.Listeners{Legacy: legacy}) }()
	t.Cleanup(func() {
		_ = restServer.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("sandboxd stopped with error: %v", err)
		}
	})
	return td
}

// discard is a ResponseWriter whose answer goes nowhere.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func (d *daemon) putCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.puts
}

// settings returns sandboxd's GET /v1/claim-settings.
func (d *daemon) settings(t *testing.T) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+d.rest+"/v1/claim-settings", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.control)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// execute runs a command through sandboxd's legacy API with the sandbox token, as the claim's
// holder does, and returns its stdout.
func (d *daemon) execute(t *testing.T, command string) string {
	t.Helper()
	status, raw := d.tryExecute(t, command)
	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || status != http.StatusOK {
		t.Fatalf("execute %q: %d %s (%v)", command, status, raw, err)
	}
	return strings.TrimSpace(out.Stdout)
}

// tryExecute is execute that returns sandboxd's status and body instead of failing.
func (d *daemon) tryExecute(t *testing.T, command string) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	req, err := http.NewRequest(http.MethodPost, "http://"+d.legacy+"/execute", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (d *daemon) lastPutTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.putTime
}
