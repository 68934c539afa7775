package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paddock-dev/paddock/internal/sandboxd/files"
)

func TestFileRoundTripsByteForByte(t *testing.T) {
	td := startDaemon(t)
	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if status, body := do(t, http.MethodPut, td.rest+"/v1/files/dir%2Fsub%2Fblob.bin?mode=0600", bytes.NewReader(data)); status != http.StatusNoContent {
		t.Fatalf("PUT = %d %s, want 204", status, body)
	}
	status, body := do(t, http.MethodGet, td.rest+"/v1/files/dir/sub/blob.bin", nil)
	if status != http.StatusOK || !bytes.Equal([]byte(body), data) {
		t.Fatalf("GET = %d with %d bytes, want 200 and the %d bytes uploaded", status, len(body), len(data))
	}
	info, err := os.Stat(filepath.Join(td.root, "dir/sub/blob.bin"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("uploaded file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	// A multipart upload of the "file" part, replacing the file.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("other", "ignored")
	fw, _ := mw.CreateFormFile("file", "blob.bin")
	_, _ = fw.Write([]byte("multipart content"))
	_ = mw.Close()
	if status, body := do(t, http.MethodPut, td.rest+"/v1/files/dir/sub/blob.bin", &form, "Content-Type", mw.FormDataContentType()); status != http.StatusNoContent {
		t.Fatalf("multipart PUT = %d %s", status, body)
	}
	if _, body := do(t, http.MethodGet, td.rest+"/v1/files/dir/sub/blob.bin", nil); body != "multipart content" {
		t.Fatalf("after multipart PUT GET = %q", body)
	}
	assertNoTempFiles(t, td.root)
}

func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".sandboxd-tmp-") {
			t.Errorf("temporary upload file left behind: %s", p)
		}
		return nil
	})
}

func TestDirectoryListingExistsDeleteAndMkdir(t *testing.T) {
	td := startDaemon(t)
	for _, p := range []string{"b.txt", "a/inner.txt"} {
		if status, _ := do(t, http.MethodPut, td.rest+"/v1/files/"+p, strings.NewReader("12345")); status != http.StatusNoContent {
			t.Fatalf("PUT %s = %d", p, status)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(td.root, "escaping-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b.txt", filepath.Join(td.root, "good-link")); err != nil {
		t.Fatal(err)
	}
	status, body := do(t, http.MethodGet, td.rest+"/v1/files/", nil)
	if status != http.StatusOK {
		t.Fatalf("GET root = %d %s", status, body)
	}
	var listing directoryListing
	if err := json.Unmarshal([]byte(body), &listing); err != nil {
		t.Fatal(err)
	}
	want := directoryListing{Path: "/", Entries: []files.Entry{
		{Name: "a", Type: "directory", Mode: "0755"},
		{Name: "b.txt", Size: 5, Type: "file", Mode: "0644"},
		{Name: "good-link", Size: 5, Type: "file", Mode: "0644"},
	}}
	if diff := cmp.Diff(want, listing, cmpopts.IgnoreFields(files.Entry{}, "ModifiedAt", "ModTime", "Size")); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
	// An empty directory lists as [] rather than null.
	if status, _ := do(t, http.MethodPut, td.rest+"/v1/files/empty?type=directory", nil); status != http.StatusNoContent {
		t.Fatalf("mkdir = %d", status)
	}
	if _, body := do(t, http.MethodGet, td.rest+"/v1/files/empty", nil); !strings.Contains(body, `"entries":[]`) || !strings.Contains(body, `"path":"/empty"`) {
		t.Errorf("empty dir listing = %s", body)
	}
	for p, want := range map[string]int{"b.txt": 200, "a": 200, "missing": 404, "escaping-link": 403} {
		if status, body := do(t, http.MethodHead, td.rest+"/v1/files/"+p, nil); status != want || body != "" {
			t.Errorf("HEAD %s = %d %q, want %d with no body", p, status, body, want)
		}
	}
	deletes := []struct {
		path string
		want int
	}{
		{"a", http.StatusConflict}, // not empty
		{"a?recursive=maybe", http.StatusBadRequest},
		{"a?recursive=true", http.StatusNoContent},
		{"missing", http.StatusNotFound},
		{"good-link", http.StatusNoContent}, // removes the link, not b.txt
		{"", http.StatusConflict},           // the root without recursive
	}
	for _, d := range deletes {
		if status, body := do(t, http.MethodDelete, td.rest+"/v1/files/"+d.path, nil); status != d.want {
			t.Errorf("DELETE %s = %d %s, want %d", d.path, status, body, d.want)
		}
	}
	if _, err := os.Stat(filepath.Join(td.root, "b.txt")); err != nil {
		t.Errorf("b.txt after deleting the link to it: %v", err)
	}
	if status, _ := do(t, http.MethodDelete, td.rest+"/v1/files/?recursive=true", nil); status != http.StatusNoContent {
		t.Fatalf("clearing the root = %d", status)
	}
	if entries, err := os.ReadDir(td.root); err != nil || len(entries) != 0 {
		t.Errorf("root after recursive delete: %v entries, %v; want it empty and still there", len(entries), err)
	}
}

// TestBadFileInput sends traversal attempts and malformed requests; each gets its status and
// {"code","message"} body, loses no data, and leaves the daemon serving.
func TestBadFileInput(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.MaxUploadBytes = 1024 })
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(td.root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(td.root, "keep.txt"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(td.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4096)
	cases := []struct {
		name, method, path, body, contentType string
		status                                int
		code                                  string
	}{
		{"dotdot encoded", "GET", "%2E%2E/%2E%2E/etc/passwd", "", "", 403, codePermissionDenied},
		{"dotdot slash encoded", "GET", "..%2F..%2Fetc%2Fpasswd", "", "", 403, codePermissionDenied},
		{"symlink escape read", "GET", "out/secret", "", "", 403, codePermissionDenied},
		{"symlink escape write", "PUT", "out/new-file", "x", "", 403, codePermissionDenied},
		{"symlink escape deep write", "PUT", "out/a/b/c", "x", "", 403, codePermissionDenied},
		{"symlink escape delete", "DELETE", "out/secret", "", "", 403, codePermissionDenied},
		{"nul byte", "GET", "a%00b", "", "", 400, codeInvalidArgument},
		{"missing", "GET", "nope", "", "", 404, codeNotFound},
		{"a 5,000-character name", "GET", strings.Repeat("n", 5000), "", "", 400, codeInvalidArgument},
		{"a 5,000-character name written", "PUT", strings.Repeat("n", 5000), "x", "", 400, codeInvalidArgument},
		{"12,000 levels", "GET", strings.Repeat("d/", 12000), "", "", 400, codeInvalidArgument},
		{"fifo", "GET", "fifo", "", "", 400, codeInvalidArgument},
		{"bad mode", "PUT", "keep.txt?mode=777", "x", "", 400, codeInvalidArgument},
		{"bad mode digits", "PUT", "keep.txt?mode=0999", "x", "", 400, codeInvalidArgument},
		{"bad type", "PUT", "keep.txt?type=fifo", "x", "", 400, codeInvalidArgument},
		{"onto a directory", "PUT", "", "x", "", 400, codeInvalidArgument},
		{"parent is a file", "PUT", "keep.txt/child", "x", "", 409, codeConflict},
		{"body over the limit", "PUT", "keep.txt", big, "", 413, codeResourceExhausted},
		{"multipart without file part", "PUT", "keep.txt", "--XX\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--XX--\r\n", "multipart/form-data; boundary=XX", 400, codeInvalidArgument},
		{"malformed multipart", "PUT", "keep.txt", "garbage", "multipart/form-data; boundary=XX", 400, codeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			var header []string
			if tc.contentType != "" {
				header = []string{"Content-Type", tc.contentType}
			}
			status, got := do(t, tc.method, td.rest+"/v1/files/"+tc.path, body, header...)
			var e apiError
			if status != tc.status || json.Unmarshal([]byte(got), &e) != nil || e.Code != tc.code || e.Message == "" {
				t.Fatalf("%s %s = %d %s, want %d with code %s and a message", tc.method, tc.path, status, got, tc.status, tc.code)
			}
			if b, err := os.ReadFile(filepath.Join(td.root, "keep.txt")); err != nil || string(b) != "original" {
				t.Fatalf("keep.txt after a refused request = %q, %v; want it untouched", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" {
				t.Fatalf("outside file after a refused request = %q, %v", b, err)
			}
			assertNoTempFiles(t, td.root)
			td.assertHealthy(t)
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new-file")); err == nil {
		t.Error("a write through an escaping symlink created a file outside the root")
	}
}

// TestUploadCutOffLeavesNoTrace: a client that dies mid-upload leaves the old file and no temp file.
func TestUploadCutOffLeavesNoTrace(t *testing.T) {
	td := startDaemon(t)
	if err := os.WriteFile(filepath.Join(td.root, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPut, td.rest+"/v1/files/f", pr)
	req.ContentLength = 1 << 20 // promise more than is sent
	// The server may answer or drop the connection; either way the file is what matters.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	_, _ = pw.Write([]byte("partial"))
	pw.CloseWithError(io.ErrUnexpectedEOF)
	<-done
	if b, _ := os.ReadFile(filepath.Join(td.root, "f")); string(b) != "old" {
		t.Fatalf("file after a cut-off upload = %q, want old", b)
	}
	td.assertHealthy(t)
	assertNoTempFiles(t, td.root)
}

func TestRESTTokenRequired(t *testing.T) {
	td := startDaemon(t, func(c *Config) { c.Token = "s3cret" })
	if status, _ := do(t, http.MethodGet, td.rest+"/v1/health", nil); status != http.StatusOK {
		t.Errorf("health without token = %d, want 200 (probes carry no token)", status)
	}
	for _, header := range [][]string{nil, {"Authorization", "Bearer nope"}, {"Authorization", "s3cret"}} {
		status, body := do(t, http.MethodGet, td.rest+"/v1/files/", nil, header...)
		if status != http.StatusUnauthorized || !strings.Contains(body, codeUnauthenticated) {
			t.Errorf("GET with %q = %d %s, want 401 UNAUTHENTICATED", header, status, body)
		}
	}
	if status, _ := do(t, http.MethodGet, td.rest+"/v1/files/", nil, "Authorization", "Bearer s3cret"); status != http.StatusOK {
		t.Errorf("GET with the token = %d, want 200", status)
	}
	if status, _ := do(t, http.MethodPost, td.legacy+"/execute", strings.NewReader(`{"command":"true"}`)); status != http.StatusUnauthorized {
		t.Errorf("legacy execute without token = %d, want 401", status)
	}
}

func TestMetadataAndHealth(t *testing.T) {
	td := startDaemon(t, func(c *Config) {
		c.Environ = []string{"SANDBOX_NAME=sb-1", "SANDBOX_API_TOKEN=x", "SANDBOX_db_password=y", "OTHER=z"}
	})
	_, body := do(t, http.MethodGet, td.rest+"/v1/metadata", nil)
	if diff := cmp.Diff(`{"env":{"SANDBOX_NAME":"sb-1"}}`, strings.TrimSpace(body)); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	_, body = do(t, http.MethodGet, td.rest+"/v1/health", nil)
	var h struct {
		Status        string `json:"status"`
		UptimeSeconds *int64 `json:"uptime_seconds"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || h.Status != "ok" || h.UptimeSeconds == nil {
		t.Errorf("health = %s", body)
	}
	td.d.ready.Store(false)
	if status, body := do(t, http.MethodGet, td.rest+"/v1/health", nil); status != http.StatusServiceUnavailable || !strings.Contains(body, codeUnavailable) {
		t.Errorf("health while shutting down = %d %s, want 503 UNAVAILABLE", status, body)
	}
}
