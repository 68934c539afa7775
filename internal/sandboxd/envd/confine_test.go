package envd

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	fspb "github.com/paddock-dev/paddock/api/proto/envd/filesystem"
	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
)

func TestRootRelative(t *testing.T) {
	p := paths{home: "/home/user"}
	for in, want := range map[string]string{
		"":                     ".",
		".":                    ".",
		"a/b":                  "a/b",
		"/home/user":           ".",
		"/home/user/a":         "a",
		"/home/user/../x":      "/home/x",
		"/home/username/a":     "/home/username/a",
		"/tmp/x":               "/tmp/x",
		"../../etc/passwd":     "/etc/passwd",
		"/home/user/a/../../b": "/home/b",
	} {
		got, err := p.rootRelative(in)
		if err != nil || got != want {
			t.Errorf("rootRelative(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := p.rootRelative("a\x00b"); err == nil {
		t.Error("rootRelative accepted a NUL byte")
	}
}

// escapeFixture adds a directory outside the root holding a secret, and a symlink "out" to it.
func escapeFixture(t *testing.T) (*fixture, string) {
	f := newFixture(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.root.Dir(), "out")); err != nil {
		t.Fatal(err)
	}
	return f, outside
}

// TestEveryMethodIsConfined sends a path through a symlink that leads out of the root to every
// method that takes a path: each refuses it, and nothing outside changes.
func TestEveryMethodIsConfined(t *testing.T) {
	f, outside := escapeFixture(t)
	ctx := testContext(t)
	const escape = "/home/user/out/secret"
	calls := map[string]func() error{
		"Stat": func() error {
			_, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "out/secret"}))
			return err
		},
		"MakeDir": func() error {
			_, err := f.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: "out/new"}))
			return err
		},
		"ListDir": func() error {
			_, err := f.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "out"}))
			return err
		},
		"Remove": func() error {
			_, err := f.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: escape}))
			return err
		},
		"Move src": func() error {
			_, err := f.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: escape, Destination: "x"}))
			return err
		},
		"Move dst": func() error {
			_, err := f.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "out", Destination: "out/moved"}))
			return err
		},
		"CreateWatcher": func() error {
			_, err := f.fs.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "out"}))
			return err
		},
		"WatchDir": func() error {
			s, err := f.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "out"}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		},
		"Start cwd": func() error {
			s, err := f.proc.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/pwd", Cwd: ptr("out")}}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		},
	}
	for name, call := range calls {
		if err := call(); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s through an escaping symlink: %v, want permission_denied", name, err)
		}
	}
	rest := map[string]*http.Request{
		"GET /files":  must(http.NewRequest(http.MethodGet, f.url+"/files?path="+url.QueryEscape(escape), nil)),
		"POST /files": must(http.NewRequest(http.MethodPost, f.url+"/files?path="+url.QueryEscape(escape), strings.NewReader("pwned"))),
	}
	for name, req := range rest {
		req.Header.Set(AccessTokenHeader, testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s through an escaping symlink: %d, want 403", name, resp.StatusCode)
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Fatalf("outside directory changed: %v %v", entries, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("secret changed to %q", b)
	}
	f.assertHealthy(t)
}

func ptr[T any](v T) *T { return &v }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// upload posts a multipart body with the given file parts (filename = target path).
func (f *fixture) upload(t *testing.T, query string, parts map[string]string) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, content := range parts {
		w, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, content)
	}
	mw.Close()
	status, _, resp := f.post(t, "/files"+query, mw.FormDataContentType(), body.Bytes())
	return status, string(resp)
}

func TestFilesREST(t *testing.T) {
	f := newFixture(t)
	status, body := f.upload(t, "", map[string]string{"/home/user/d/one.txt": "one", "d/two.txt": "two"})
	if status != http.StatusOK || !strings.Contains(body, `"path":"/home/user/d/one.txt"`) || !strings.Contains(body, `"name":"two.txt"`) {
		t.Fatalf("multi-file upload: %d %s", status, body)
	}
	if b, err := os.ReadFile(filepath.Join(f.root.Dir(), "d/two.txt")); err != nil || string(b) != "two" {
		t.Fatalf("d/two.txt = %q, %v", b, err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("zipped"))
	zw.Close()
	status, _, resp := f.post(t, "/files?path=z.txt", "application/octet-stream", gz.Bytes(), "Content-Encoding", "gzip")
	if status != http.StatusOK {
		t.Fatalf("gzip upload: %d %s", status, resp)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root.Dir(), "z.txt")); string(b) != "zipped" {
		t.Fatalf("z.txt = %q", b)
	}
	cases := []struct {
		name, method, query, ctype string
		body                       []byte
		header                     []string
		want                       int
	}{
		{"read a directory", "GET", "?path=d", "", nil, nil, 400},
		{"read a missing file", "GET", "?path=nope", "", nil, nil, 404},
		{"read without a path", "GET", "", "", nil, nil, 400},
		{"read a NUL path", "GET", "?path=a%00b", "", nil, nil, 400},
		{"write onto a directory", "POST", "?path=d", "application/octet-stream", []byte("x"), nil, 400},
		{"write without a path", "POST", "", "application/octet-stream", []byte("x"), nil, 400},
		{"bad gzip", "POST", "?path=g", "application/octet-stream", []byte("not gzip"), []string{"Content-Encoding", "gzip"}, 400},
		{"unknown encoding", "POST", "?path=g", "application/octet-stream", []byte("x"), []string{"Content-Encoding", "br"}, 400},
		{"multipart without file part", "POST", "?path=g", "multipart/form-data; boundary=b", []byte("--b--\r\n"), nil, 400},
		{"unknown user", "POST", "?path=g&username=mallory", "application/octet-stream", []byte("x"), nil, 401},
	}
	for _, tc := range cases {
		req := must(http.NewRequest(tc.method, f.url+"/files"+tc.query, bytes.NewReader(tc.body)))
		req.Header.Set(AccessTokenHeader, testToken)
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		for i := 0; i+1 < len(tc.header); i += 2 {
			req.Header.Set(tc.header[i], tc.header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), `"message"`) {
			t.Errorf("%s: %d %s, want %d with a message", tc.name, resp.StatusCode, b, tc.want)
		}
	}
	f.assertHealthy(t)
}

func TestUploadLimit(t *testing.T) {
	f := newFixture(t)
	s := New(Config{Root: f.root, Procs: f.procs, MaxUploadBytes: 4})
	h := s.Handler()
	rec := func(body string) int {
		req := must(http.NewRequest(http.MethodPost, "/files?path=lim.txt", strings.NewReader(body)))
		w := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(w, req)
		return w.status
	}
	if got := rec("1234"); got != http.StatusOK {
		t.Fatalf("upload at the limit: %d", got)
	}
	if got := rec("12345"); got != http.StatusInsufficientStorage {
		t.Fatalf("upload over the limit: %d, want 507 (the SDK's NotEnoughSpaceError)", got)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root.Dir(), "lim.txt")); string(b) != "1234" {
		t.Fatalf("the old file was not kept: %q", b)
	}
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(s int) { r.status = s }

func TestGzipDownload(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root.Dir(), "a.txt"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := must(http.NewRequest(http.MethodGet, f.url+"/files?path=/home/user/a.txt", nil))
	req.Header.Set(AccessTokenHeader, testToken)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("encoding %q: %v", resp.Header.Get("Content-Encoding"), err)
	}
	b, _ := io.ReadAll(zr)
	if diff := cmp.Diff("content", string(b)); diff != "" {
		t.Error(diff)
	}
}
