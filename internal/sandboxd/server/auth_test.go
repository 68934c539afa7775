package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/test/framework"
)

func TestNewRefusesNoTokenWithoutTheOptIn(t *testing.T) {
	_, err := New(Config{RootDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "SANDBOXD_TOKEN") || !strings.Contains(err.Error(), "--allow-unauthenticated") {
		t.Fatalf("New without a token = %v, want an error naming SANDBOXD_TOKEN and --allow-unauthenticated", err)
	}
	_, err = New(Config{RootDir: t.TempDir(), Token: "t", RequireClaim: true})
	if err == nil || !strings.Contains(err.Error(), "SANDBOXD_CONTROL_TOKEN") {
		t.Fatalf("New locked without a control token = %v, want an error naming SANDBOXD_CONTROL_TOKEN", err)
	}
}

func TestAccessTokenHeaderCarriesTheSandboxToken(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Token = "s3cret" })
	if status, body := do(t, http.MethodGet, td.rest+"/v1/files/", nil, AccessTokenHeader, "s3cret"); status != http.StatusOK {
		t.Errorf("GET with X-Access-Token = %d %s, want 200", status, body)
	}
	if status, _ := do(t, http.MethodGet, td.rest+"/v1/files/", nil, AccessTokenHeader, "wrong"); status != http.StatusUnauthorized {
		t.Errorf("GET with a wrong X-Access-Token = %d, want 401", status)
	}
}

// lockedDaemon is an unclaimed warm member: locked, with a sandbox and a control token.
func lockedDaemon(t *testing.T) *testDaemon {
	return startDaemon(t, func(c *Config) {
		c.Token, c.ControlToken, c.RequireClaim = "sandbox-token", "control-token", true
	})
}

// calls are the exec and file calls of every API, as token -> status (and body).
func everyAPI(t *testing.T, td *testDaemon, token string) map[string]error {
	ctx := withToken(framework.Context(t, 30*time.Second), token)
	auth := []string{"Authorization", "Bearer " + token}
	out := map[string]error{}
	httpCall := func(name, method, url, body string) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		status, text := do(t, method, url, r, auth...)
		if status >= 300 {
			out[name] = &AuthError{Status: status, Message: text}
			return
		}
		out[name] = nil
	}
	httpCall("REST GET /v1/files", http.MethodGet, td.rest+"/v1/files/", "")
	httpCall("REST PUT /v1/files", http.MethodPut, td.rest+"/v1/files/planted.txt", "planted")
	httpCall("REST POST /v1/processes", http.MethodPost, td.rest+"/v1/processes", `{"config":{"command":["true"]}}`)
	httpCall("legacy POST /execute", http.MethodPost, td.legacy+"/execute", `{"command":"true"}`)
	httpCall("legacy GET /list", http.MethodGet, td.legacy+"/list/", "")
	_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf("true")})
	out["gRPC Execute"] = err
	stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: cfgOf("true")})
	if err == nil {
		_, err = stream.Recv()
	}
	out["gRPC Start"] = err
	return out
}

// TestLockedMemberAnswersOnlyTheController is item 7 of issue 15 on the daemon: an unclaimed
// warm member refuses exec and file calls made with the sandbox token on every API, the sandbox
// token cannot unlock it, the control token can, and once bound it refuses another claim.
func TestLockedMemberAnswersOnlyTheController(t *testing.T) {
	td := lockedDaemon(t)
	if status, _ := do(t, http.MethodGet, td.rest+"/v1/health", nil); status != http.StatusOK {
		t.Errorf("health of a locked member = %d, want 200 (kubelet probes)", status)
	}
	for name, err := range everyAPI(t, td, "sandbox-token") {
		if err == nil {
			t.Errorf("%s with the sandbox token on a locked member succeeded, want 403", name)
			continue
		}
		if !strings.Contains(err.Error(), "not claimed yet") {
			t.Errorf("%s on a locked member = %v, want a message saying the sandbox is not claimed yet", name, err)
		}
		if strings.HasPrefix(name, "gRPC") {
			wantCode(t, err, codes.PermissionDenied)
		} else if ae := err.(*AuthError); ae.Status != http.StatusForbidden {
			t.Errorf("%s on a locked member = %d, want 403", name, ae.Status)
		}
	}
	if _, err := os.Stat(td.root + "/planted.txt"); err == nil {
		t.Error("a file was planted in a locked member")
	}
	for name, err := range everyAPI(t, td, "control-token") {
		if err != nil {
			t.Errorf("%s with the control token on a locked member: %v", name, err)
		}
	}

	bind := claim.Settings{ClaimName: "c1", ClaimUID: "uid-1"}
	if status, body := putSettings(t, td, "sandbox-token", bind); status != http.StatusUnauthorized {
		t.Fatalf("claim settings with the sandbox token = %d %s, want 401", status, body)
	}
	if _, ok := td.d.claims.Current(); ok || !td.d.locked.Load() {
		t.Fatal("the sandbox token bound or unlocked the member")
	}
	if status, body := putSettings(t, td, "control-token", bind); status != http.StatusOK {
		t.Fatalf("claim settings with the control token = %d %s, want 200", status, body)
	}
	for name, err := range everyAPI(t, td, "sandbox-token") {
		if err != nil {
			t.Errorf("%s with the sandbox token after the claim: %v", name, err)
		}
	}
	if status, body := putSettings(t, td, "control-token", claim.Settings{ClaimName: "c2", ClaimUID: "uid-2"}); status != http.StatusConflict {
		t.Errorf("claim settings for a second claim = %d %s, want 409", status, body)
	}
	for name, err := range everyAPI(t, td, "wrong-token") {
		if err == nil {
			t.Errorf("%s with a wrong token after the claim succeeded, want 401", name)
		}
	}
}

// TestMaxProcesses: beyond --max-processes a start is refused with 429 / ResourceExhausted on
// every API, and a slot is free again once a process ends.
func TestMaxProcesses(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.MaxProcesses = 1 })
	ctx, cancel := context.WithCancel(framework.Context(t, 30*time.Second))
	defer cancel()
	stream, err := td.grpc.Start(ctx, &processv1.StartRequest{Config: cfgOf("sleep", "300")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // init: the process runs
		t.Fatal(err)
	}
	_, err = td.grpc.Execute(framework.Context(t, 30*time.Second), &processv1.ExecuteRequest{Config: cfgOf("true")})
	wantCode(t, err, codes.ResourceExhausted)
	if err != nil && !strings.Contains(err.Error(), "--max-processes") {
		t.Errorf("Execute over the limit = %v, want the flag named", err)
	}
	if status, body := do(t, http.MethodPost, td.rest+"/v1/processes", strings.NewReader(`{"config":{"command":["true"]}}`)); status != http.StatusTooManyRequests || !strings.Contains(body, "--max-processes") {
		t.Errorf("POST /v1/processes over the limit = %d %s, want 429 naming --max-processes", status, body)
	}
	if status, body := do(t, http.MethodPost, td.legacy+"/execute", strings.NewReader(`{"command":"true"}`)); status != http.StatusTooManyRequests || !strings.Contains(body, "--max-processes") {
		t.Errorf("legacy /execute over the limit = %d %s, want 429 naming --max-processes", status, body)
	}
	cancel()
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := td.grpc.Execute(ctx, &processv1.ExecuteRequest{Config: cfgOf("true")})
		return err
	})
}
