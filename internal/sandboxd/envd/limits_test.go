package envd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// TestOverlongPathsAreBadRequests: a path over sandboxd's limits (PATH_MAX bytes, or MaxDepth
// levels) is the client's mistake, answered 400 as on the REST port and the router, with a
// message naming the limit that does not echo the whole path back.
func TestOverlongPathsAreBadRequests(t *testing.T) {
	f := newFixture(t)
	for name, p := range map[string]string{
		"too many bytes":  "/home/user/" + strings.Repeat("abcdefgh/", pathsafe.MaxPathLength/9+1),
		"too many levels": strings.Repeat("a/", pathsafe.MaxDepth+1) + "f",
	} {
		t.Run(name, func(t *testing.T) {
			check := func(how string, status int, body []byte, wantCode any) {
				t.Helper()
				var got struct {
					Code    any
					Message string
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("%s: status %d, body %.200q is not an error body: %v", how, status, body, err)
				}
				if status != http.StatusBadRequest || got.Code != wantCode {
					t.Errorf("%s: status %d code %v, want 400 and %v (message %.300q)", how, status, got.Code, wantCode, got.Message)
				}
				if !strings.Contains(got.Message, "too long") || strings.Contains(got.Message, p) || len(got.Message) > 512 {
					t.Errorf("%s: message %.300q (%d bytes): want one naming the limit, without the whole path", how, got.Message, len(got.Message))
				}
			}
			req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, f.url+"/files?path="+url.QueryEscape(p), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(AccessTokenHeader, testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			check("GET /files", resp.StatusCode, body, float64(http.StatusBadRequest))

			// The SDK names the target path in the part's file name.
			status, uploadBody := f.upload(t, "", map[string]string{p: "x"})
			check("POST /files", status, []byte(uploadBody), float64(http.StatusBadRequest))

			rpc, err := json.Marshal(map[string]string{"path": p})
			if err != nil {
				t.Fatal(err)
			}
			status, _, body = f.post(t, "/filesystem.Filesystem/Stat", "application/json", rpc)
			check("Filesystem/Stat", status, body, "invalid_argument")
		})
	}
	f.assertHealthy(t)
}
