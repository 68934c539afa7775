package server

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func legacyUpload(t *testing.T, td *testDaemon, filename, content string) (int, string) {
	t.Helper()
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte(content))
	_ = mw.Close()
	return do(t, http.MethodPost, td.legacy+"/upload", &form, "Content-Type", mw.FormDataContentType())
}

func TestLegacyRuntime(t *testing.T) {
	td := startDaemon(t)
	_, body := do(t, http.MethodGet, td.legacy+"/", nil)
	if diff := cmp.Diff(`{"message":"Sandbox Runtime is active.","status":"ok"}`, strings.TrimSpace(body)); diff != "" {
		t.Errorf("GET / (-want +got):\n%s", diff)
	}
	executes := []struct{ command, want string }{
		{`echo "hello world"`, `{"stdout":"hello world\n","stderr":"","exit_code":0}`},
		{`sh -c 'echo oops >&2; exit 4'`, `{"stdout":"","stderr":"oops\n","exit_code":4}`},
		{`pwd`, `{"stdout":"` + td.root + `\n","stderr":"","exit_code":0}`},
		{`echo 'unclosed`, `{"stdout":"","stderr":"Failed to execute command: No closing quotation","exit_code":1}`},
		{`no-such-command-xyz`, ``},
	}
	for _, e := range executes {
		req, _ := json.Marshal(map[string]string{"command": e.command})
		status, body := do(t, http.MethodPost, td.legacy+"/execute", bytes.NewReader(req))
		if status != http.StatusOK {
			t.Errorf("execute %q = %d %s", e.command, status, body)
			continue
		}
		if e.want == "" {
			if !strings.Contains(body, `"exit_code":1`) || !strings.Contains(body, "Failed to execute command") {
				t.Errorf("execute %q = %s, want exit_code 1 with the reason in stderr", e.command, body)
			}
			continue
		}
		if diff := cmp.Diff(e.want, strings.TrimSpace(body)); diff != "" {
			t.Errorf("execute %q (-want +got):\n%s", e.command, diff)
		}
	}
	if status, body := legacyUpload(t, td, "sub/dir/f.txt", "payload"); status != http.StatusOK || !strings.Contains(body, "uploaded successfully") {
		t.Fatalf("upload = %d %s", status, body)
	}
	if status, body := do(t, http.MethodGet, td.legacy+"/download/sub%2Fdir%2Ff.txt", nil); status != http.StatusOK || body != "payload" {
		t.Errorf("download = %d %q", status, body)
	}
	status, body := do(t, http.MethodGet, td.legacy+"/list/sub%2Fdir", nil)
	var entries []struct {
		Name    string  `json:"name"`
		Size    int64   `json:"size"`
		Type    string  `json:"type"`
		ModTime float64 `json:"mod_time"`
	}
	if err := json.Unmarshal([]byte(body), &entries); status != http.StatusOK || err != nil || len(entries) != 1 ||
		entries[0].Name != "f.txt" || entries[0].Size != 7 || entries[0].Type != "file" || entries[0].ModTime <= 0 {
		t.Errorf("list = %d %s", status, body)
	}
	for p, want := range map[string]string{"sub%2Fdir%2Ff.txt": "true", "nope": "false"} {
		_, body := do(t, http.MethodGet, td.legacy+"/exists/"+p, nil)
		if !strings.Contains(body, `"exists":`+want) {
			t.Errorf("exists %s = %s, want exists %s", p, body, want)
		}
	}
}

func TestLegacyBadInput(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.LegacyExecTimeout = 200 * time.Millisecond })
	cases := []struct {
		name   string
		call   func() (int, string)
		status int
		body   string
	}{
		{"upload traversal", func() (int, string) { return legacyUpload(t, td, "../escape.txt", "x") }, 403, `{"message":"Access denied"}`},
		{"upload absolute outside", func() (int, string) { return legacyUpload(t, td, "/etc/evil", "x") }, 403, `{"message":"Access denied"}`},
		{"download traversal", func() (int, string) { return do(t, "GET", td.legacy+"/download/..%2F..%2Fetc%2Fpasswd", nil) }, 403, `{"message":"Access denied"}`},
		{"list traversal", func() (int, string) { return do(t, "GET", td.legacy+"/list/%2E%2E", nil) }, 403, `{"message":"Access denied"}`},
		{"exists traversal", func() (int, string) { return do(t, "GET", td.legacy+"/exists/%2E%2E%2Fx", nil) }, 403, `{"message":"Access denied"}`},
		{"download a 5,000-character name", func() (int, string) { return do(t, "GET", td.legacy+"/download/"+strings.Repeat("n", 5000), nil) }, 400, ""},
		{"download missing", func() (int, string) { return do(t, "GET", td.legacy+"/download/nope", nil) }, 404, `{"message":"File not found"}`},
		{"list a file", func() (int, string) {
			legacyUpload(t, td, "f", "x")
			return do(t, "GET", td.legacy+"/list/f", nil)
		}, 404, `{"message":"Directory not found"}`},
		{"malformed json", func() (int, string) { return do(t, "POST", td.legacy+"/execute", strings.NewReader("{")) }, 422, ""},
		{"missing command", func() (int, string) { return do(t, "POST", td.legacy+"/execute", strings.NewReader("{}")) }, 422, ""},
		{"huge body", func() (int, string) {
			return do(t, "POST", td.legacy+"/execute", strings.NewReader(`{"command":"`+strings.Repeat("a", 2<<20)+`"}`))
		}, 413, ""},
		{"upload without multipart", func() (int, string) { return do(t, "POST", td.legacy+"/upload", strings.NewReader("raw")) }, 422, ""},
		{"timeout kills", func() (int, string) {
			return do(t, "POST", td.legacy+"/execute", strings.NewReader(`{"command":"sleep 300"}`))
		}, 200, `{"stdout":"","stderr":"Failed to execute command: command timed out after 200ms and its process group was killed","exit_code":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := tc.call()
			if status != tc.status || (tc.body != "" && strings.TrimSpace(body) != tc.body) {
				t.Fatalf("= %d %s, want %d %s", status, body, tc.status, tc.body)
			}
			td.assertHealthy(t)
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(td.root), "escape.txt")); err == nil {
		t.Error("a legacy upload escaped the root")
	}
}
