package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/test/framework"
)

func getActivity(t *testing.T, td *testDaemon, method, path string, header ...string) sandboxd.Activity {
	t.Helper()
	status, body := do(t, method, td.rest+path, nil, header...)
	if status != http.StatusOK {
		t.Fatalf("%s %s = %d %s, want 200", method, path, status, body)
	}
	var a sandboxd.Activity
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("%s %s: body %q is not an Activity: %v", method, path, body, err)
	}
	return a
}

func TestActivityQueryAndHealthAreNotActivity(t *testing.T) {
	td := startDaemon(t)
	first := getActivity(t, td, http.MethodGet, sandboxd.ActivityPath)
	do(t, http.MethodGet, td.rest+"/v1/health", nil)
	again := getActivity(t, td, http.MethodGet, sandboxd.ActivityPath)
	if !again.LastActivity.Equal(first.LastActivity) || again.Busy() {
		t.Fatalf("after health and an activity query: %+v, want unchanged %+v and not busy", again, first)
	}
}

func TestKeepaliveAndCallsAreActivity(t *testing.T) {
	td := startDaemon(t)
	before := time.Now()
	if a := getActivity(t, td, http.MethodPost, sandboxd.KeepalivePath); a.LastActivity.Before(before) {
		t.Fatalf("keepalive: lastActivity %v, want at or after %v", a.LastActivity, before)
	}
	before = time.Now()
	do(t, http.MethodGet, td.rest+"/v1/files/", nil)
	if a := getActivity(t, td, http.MethodGet, sandboxd.ActivityPath); a.LastActivity.Before(before) {
		t.Fatalf("after a files call: lastActivity %v, want at or after %v", a.LastActivity, before)
	}
	before = time.Now()
	do(t, http.MethodGet, td.legacy+"/list/", nil)
	if a := getActivity(t, td, http.MethodGet, sandboxd.ActivityPath); a.LastActivity.Before(before) {
		t.Fatalf("after a legacy call: lastActivity %v, want at or after %v", a.LastActivity, before)
	}
}

func TestRunningProcessIsActivity(t *testing.T) {
	td := startDaemon(t)
	ctx := framework.Context(t, 30*time.Second)
	stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"sleep", "30"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the start event: the process is registered
		t.Fatal(err)
	}
	a := getActivity(t, td, http.MethodGet, sandboxd.ActivityPath)
	if a.Processes != 1 || a.Streams != 1 || !a.Busy() {
		t.Fatalf("with a quiet command streaming: %+v, want 1 process, 1 stream, busy", a)
	}
}

func TestActivityNeedsTheToken(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Token, c.ControlToken = "sandbox-token", "control-token" })
	for _, path := range []string{sandboxd.ActivityPath, sandboxd.KeepalivePath} {
		method := http.MethodGet
		if path == sandboxd.KeepalivePath {
			method = http.MethodPost
		}
		if status, body := do(t, method, td.rest+path, nil); status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token = %d %s, want 401", method, path, status, body)
		}
		getActivity(t, td, method, path, "Authorization", "Bearer sandbox-token")
		getActivity(t, td, method, path, "Authorization", "Bearer control-token")
	}
}

func TestEnvdCallsAreActivity(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Token = "sandbox-token" })
	envd := httptest.NewServer(td.d.EnvdServer().Handler())
	t.Cleanup(envd.Close)
	first := td.d.Activity().LastActivity
	do(t, http.MethodGet, envd.URL+"/files?path=nothing", nil) // no token: refused, not activity
	if got := td.d.Activity().LastActivity; !got.Equal(first) {
		t.Fatalf("an unauthenticated envd call moved lastActivity from %v to %v", first, got)
	}
	before := time.Now()
	do(t, http.MethodGet, envd.URL+"/files?path=nothing", nil, "X-Access-Token", "sandbox-token")
	if got := td.d.Activity().LastActivity; got.Before(before) {
		t.Fatalf("after an authorized envd call: lastActivity %v, want at or after %v", got, before)
	}
}
