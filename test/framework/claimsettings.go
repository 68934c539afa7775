package framework

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

// BindSandboxd binds the sandboxd whose REST API is at restURL ("http://host:port") to a claim,
// as the claim controller does: PUT of settings to its claim-settings path with the control
// token. The test fails unless sandboxd answers 200.
func BindSandboxd(t testing.TB, restURL, controlToken string, settings claim.Settings) {
	t.Helper()
	body, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(Context(t, DefaultTimeout), http.MethodPut, restURL+sandboxd.ClaimSettingsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+controlToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("binding sandboxd at %s to claim %s (%s): %s", restURL, settings.ClaimName, settings.ClaimUID, resp.Status)
	}
}
