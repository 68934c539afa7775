package claimsettings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// daemon is a real sandboxd serving one pool member, on loopback.
type daemon struct {
	rest, legacy string
	token        string
	// Guarded by registry.mu: resolutions counts address lookups, failResolutions makes the next
	// ones fail.
	resolutions, failResolutions int

	mu sync.Mutex
	// onPut runs when a claim-settings PUT arrives, before sandboxd handles it.
	onPut func()
	puts  int
}

// startDaemon runs sandboxd with claim settings enabled for token.
func startDaemon(t *testing.T, token string) *daemon {
	t.Helper()
	// The controller sends claim settings with token, so it is this daemon's control token; the
	// test reads through the legacy API without a sandbox token: the explicit opt-in.
	d, err := server.New(server.Config{RootDir: t.TempDir(), ControlToken: token, AllowUnauthenticated: true, Environ: os.Environ(), ShutdownTimeout: 5 * time.Second})
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
	td := &daemon{token: token}
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
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// execute runs a command through sandboxd's legacy API and returns its stdout.
func (d *daemon) execute(t *testing.T, command string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	resp, err := http.Post("http://"+d.legacy+"/execute", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("execute %q: %d %s (%v)", command, resp.StatusCode, raw, err)
	}
	return strings.TrimSpace(out.Stdout)
}

// putSettings binds the daemon to some other claim, as if it already served one.
func (d *daemon) putSettings(t *testing.T, claimUID string) {
	t.Helper()
	body := fmt.Sprintf(`{"claimName":"other","claimUID":%q}`, claimUID)
	req, err := http.NewRequest(http.MethodPut, "http://"+d.rest+"/v1/claim-settings", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("binding sandboxd to claim %s: %s", claimUID, resp.Status)
	}
}
