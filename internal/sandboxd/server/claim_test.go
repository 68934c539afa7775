package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/metadata"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/test/framework"
)

func putSettings(t *testing.T, td *testDaemon, token string, s any) (int, string) {
	t.Helper()
	body, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, http.MethodPut, td.rest+"/v1/claim-settings", strings.NewReader(string(body)), "Authorization", "Bearer "+token)
}

// TestClaimSettingsApplyToLaterProcesses is the warm-claim path: a sandbox already running gets a
// claim's env and files, and every process started afterwards sees them.
func TestClaimSettingsApplyToLaterProcesses(t *testing.T) {
	td := startDaemon(t, func(c *Config) {
		c.ControlToken = "claim-token"
		c.Token = "user-token"
		c.Environ = append(os.Environ(), "MODEL=daemon-default")
	})
	ctx := framework.Context(t, 30*time.Second)
	run := func(cfg *processv1.ProcessConfig) string {
		t.Helper()
		res, err := td.grpc.Execute(withToken(ctx, "user-token"), &processv1.ExecuteRequest{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.GetStdout())
	}
	script := cfgOf("sh", "-c", `echo "$MODEL $API_URL"; cat config/app.json`)
	if got := run(script); got != "daemon-default \n" {
		t.Fatalf("before the claim: %q", got)
	}
	settings := claim.Settings{
		ClaimName: "c1", ClaimUID: "uid-1",
		Env:   []claim.EnvVar{{Name: "MODEL", Value: "claimed"}, {Name: "API_URL", Value: "http://x"}},
		Files: []claim.File{{Path: "config/app.json", Content: []byte(`{"k":1}`), Mode: "0600"}},
	}
	status, body := putSettings(t, td, "claim-token", settings)
	if status != http.StatusOK {
		t.Fatalf("PUT claim settings = %d %s", status, body)
	}
	if diff := cmp.Diff(`{"claimName":"c1","claimUID":"uid-1","env":["API_URL","MODEL"],"files":["config/app.json"]}`, strings.TrimSpace(body)); diff != "" {
		t.Errorf("PUT response (-want +got):\n%s", diff)
	}
	if got := run(script); got != "claimed http://x\n{\"k\":1}" {
		t.Errorf("Execute after the claim = %q", got)
	}
	// The request's env_vars still win over the claim's.
	over := &processv1.ProcessConfig{Command: []string{"sh", "-c", "echo $MODEL"}, EnvVars: map[string]string{"MODEL": "request"}}
	if got := run(over); got != "request\n" {
		t.Errorf("request env over claim env = %q", got)
	}
	// So does the legacy runtime.
	_, body = do(t, http.MethodPost, td.legacy+"/execute", strings.NewReader(`{"command":"sh -c 'echo $MODEL'"}`), "Authorization", "Bearer user-token")
	if !strings.Contains(body, `"stdout":"claimed\n"`) {
		t.Errorf("legacy execute after the claim = %s", body)
	}
	if info, err := os.Stat(filepath.Join(td.root, "config/app.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("claim file: %v", err)
	}
	// A retry for the same claim is accepted; another claim is refused and changes nothing.
	if status, _ := putSettings(t, td, "claim-token", settings); status != http.StatusOK {
		t.Errorf("retry for the same claim = %d, want 200", status)
	}
	other := claim.Settings{ClaimName: "c2", ClaimUID: "uid-2", Env: []claim.EnvVar{{Name: "MODEL", Value: "stolen"}}}
	if status, body := putSettings(t, td, "claim-token", other); status != http.StatusConflict {
		t.Errorf("settings for another claim = %d %s, want 409", status, body)
	}
	if got := run(cfgOf("sh", "-c", "echo $MODEL")); got != "claimed\n" {
		t.Errorf("after a refused claim MODEL = %q", got)
	}
	if status, body := do(t, http.MethodGet, td.rest+"/v1/claim-settings", nil, "Authorization", "Bearer claim-token"); status != 200 || !strings.Contains(body, `"claimUID":"uid-1"`) {
		t.Errorf("GET claim settings = %d %s", status, body)
	}
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func TestClaimSettingsBadInput(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.ControlToken = "claim-token" })
	disabled := startDaemon(t)
	cases := []struct {
		name   string
		td     *testDaemon
		token  string
		body   string
		status int
	}{
		{"disabled", disabled, "anything", `{"claimUID":"u"}`, 403},
		{"no token", td, "", `{"claimUID":"u"}`, 401},
		{"wrong token", td, "user-token", `{"claimUID":"u"}`, 401},
		{"malformed json", td, "claim-token", `{"claimUID":`, 400},
		{"unknown field", td, "claim-token", `{"claimUID":"u","envv":[]}`, 400},
		{"trailing data", td, "claim-token", `{"claimUID":"u"} {}`, 400},
		{"missing uid", td, "claim-token", `{"claimName":"c"}`, 400},
		{"bad env name", td, "claim-token", `{"claimUID":"u","env":[{"name":"A=B","value":"x"}]}`, 400},
		{"bad file mode", td, "claim-token", `{"claimUID":"u","files":[{"path":"f","content":"","mode":"777"}]}`, 400},
		{"file escapes", td, "claim-token", `{"claimUID":"u","files":[{"path":"../../etc/x","content":""}]}`, 403},
		{"huge body", td, "claim-token", `{"claimUID":"` + strings.Repeat("u", 2<<20) + `"}`, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var header []string
			if tc.token != "" {
				header = []string{"Authorization", "Bearer " + tc.token}
			}
			status, body := do(t, http.MethodPut, tc.td.rest+"/v1/claim-settings", strings.NewReader(tc.body), header...)
			var e apiError
			if status != tc.status || json.Unmarshal([]byte(body), &e) != nil || e.Message == "" {
				t.Fatalf("= %d %s, want %d with a message", status, body, tc.status)
			}
			tc.td.assertHealthy(t)
		})
	}
	// None of the refused requests bound the sandbox to a claim.
	if _, ok := td.d.claims.Current(); ok {
		t.Error("a refused request left claim settings behind")
	}
}
