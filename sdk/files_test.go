package sdk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// filesUnderTest is Files on a fresh in-process sandboxd, and the daemon's root on disk.
func filesUnderTest(t *testing.T) (*Files, string) {
	t.Helper()
	d := startSandboxd(t)
	f, err := NewFiles(Endpoint{URL: d.restURL})
	if err != nil {
		t.Fatal(err)
	}
	return f, d.root
}

// binaryData holds every byte value many times over, so any text translation shows.
func binaryData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

// onlyReader hides every method but Read, as a pipe would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestFilesRoundTrip(t *testing.T) {
	f, root := filesUnderTest(t)
	ctx := context.Background()
	data := binaryData(3<<20 + 17)

	if err := f.Upload(ctx, "deep/er/blob.bin", bytes.NewReader(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, info, err := f.Download(ctx, "deep/er/blob.bin", &got)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("Download gave %d bytes, equal %v; want the %d uploaded bytes", n, bytes.Equal(got.Bytes(), data), len(data))
	}
	if diff := cmp.Diff(FileInfo{Name: "blob.bin", Size: int64(len(data)), Mode: 0o600}, *info, ignoreModTime); diff != "" {
		t.Errorf("Download info (-want +got):\n%s", diff)
	}
	if info.ModTime.IsZero() {
		t.Error("Download info has no modification time")
	}

	// A pipe cannot be rewound; it is sent once, streamed.
	if err := f.Upload(ctx, "piped.txt", onlyReader{strings.NewReader("from a pipe\n")}, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "piped.txt")); err != nil || string(b) != "from a pipe\n" {
		t.Errorf("piped.txt on disk = %q, %v", b, err)
	}
	if err := f.Mkdir(ctx, "deep/empty", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir(ctx, "deep/empty", 0); err != nil {
		t.Errorf("Mkdir of an existing directory = %v, want success", err)
	}
	entries, err := f.List(ctx, "deep")
	if err != nil {
		t.Fatal(err)
	}
	want := []FileInfo{{Name: "empty", IsDir: true, Mode: 0o700}, {Name: "er", IsDir: true, Mode: 0o755}}
	if diff := cmp.Diff(want, entries, ignoreModTime, ignoreDirSize(entries)); diff != "" {
		t.Errorf("List(deep) (-want +got):\n%s", diff)
	}
	for _, p := range []string{"deep", "deep/", "/deep", root + "/deep"} {
		if info, err := f.Stat(ctx, p); err != nil || !info.IsDir || info.Name != "deep" {
			t.Errorf("Stat(%q) = %+v, %v; want the directory deep", p, info, err)
		}
	}
	if info, err := f.Stat(ctx, "."); err != nil || !info.IsDir {
		t.Errorf("Stat(.) = %+v, %v; want the root directory", info, err)
	}

	if err := f.Upload(ctx, "odd name%?#.txt", strings.NewReader("odd"), 0); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if _, _, err := f.Download(ctx, "odd name%?#.txt", &got); err != nil || got.String() != "odd" {
		t.Errorf("Download(odd name) = %q, %v", got.String(), err)
	}

	if err := f.Remove(ctx, "deep", false); err == nil {
		t.Error("Remove of a non-empty directory without recursive succeeded")
	}
	if err := f.Remove(ctx, "deep", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "deep"); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("Stat after Remove = %v, want ErrFileNotFound", err)
	}
}

var ignoreModTime = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ModTime" }, cmp.Ignore())

// ignoreDirSize ignores the size of directories, which depends on the file system.
func ignoreDirSize([]FileInfo) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Size" }, cmp.Ignore())
}

func TestFilesErrors(t *testing.T) {
	f, root := filesUnderTest(t)
	ctx := context.Background()
	if err := f.Upload(ctx, "dir/f.txt", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	var sink bytes.Buffer
	tests := []struct {
		name     string
		call     func() error
		wantIs   error
		wantText string
	}{
		{"stat missing", func() error { _, err := f.Stat(ctx, "nope"); return err }, ErrFileNotFound, "Not Found"},
		{"download missing", func() error { _, _, err := f.Download(ctx, "nope", &sink); return err }, ErrFileNotFound, "does not exist"},
		{"download a directory", func() error { _, _, err := f.Download(ctx, "dir", &sink); return err }, ErrIsDirectory, "list it"},
		{"list a file", func() error { _, err := f.List(ctx, "dir/f.txt"); return err }, nil, "not a directory"},
		{"escape by ..", func() error { return f.Upload(ctx, "../outside.txt", strings.NewReader("x"), 0) }, ErrPermissionDenied, "outside sandbox root"},
		{"escape in the middle", func() error { _, err := f.Stat(ctx, "dir/../../outside.txt"); return err }, ErrPermissionDenied, "403"},
		{"upload over a directory", func() error { return f.Upload(ctx, "dir", strings.NewReader("x"), 0) }, nil, "directory"},
		{"mkdir over a file", func() error { return f.Mkdir(ctx, "dir/f.txt", 0) }, nil, "CONFLICT"},
		{"upload to the root", func() error { return f.Upload(ctx, "/", strings.NewReader("x"), 0) }, nil, "names the sandbox root"},
		{"remove the root", func() error { return f.Remove(ctx, ".", true) }, nil, "names the sandbox root"},
		{"NUL byte", func() error { _, err := f.Stat(ctx, "a\x00b"); return err }, nil, "NUL"},
	}
	for _, tt := range tests {
		err := tt.call()
		if err == nil || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) || !strings.Contains(err.Error(), tt.wantText) {
			t.Errorf("%s: err = %v; want one matching %v and containing %q", tt.name, err, tt.wantIs, tt.wantText)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "outside.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused escape left a file outside the root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "dir", "f.txt")); err != nil || string(b) != "x" {
		t.Errorf("dir/f.txt after the refused calls = %q, %v; want it untouched", b, err)
	}
}

// TestFilesRetries puts a proxy that fails the first requests in front of the real daemon.
func TestFilesRetries(t *testing.T) {
	tests := []struct {
		name         string
		failTimes    int
		body         func([]byte) io.Reader
		wantRequests int32
		wantErr      bool
	}{
		{"seekable body rewound after 503s", 2, func(b []byte) io.Reader { return bytes.NewReader(b) }, 3, false},
		{"pipe sent once", 1, func(b []byte) io.Reader { return onlyReader{bytes.NewReader(b)} }, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startSandboxd(t)
			target, _ := url.Parse(d.restURL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) <= int32(tt.failTimes) {
					_, _ = io.Copy(io.Discard, r.Body) // the body was sent; a retry must send it again
					http.Error(w, `{"code":"UNAVAILABLE","message":"injected"}`, http.StatusServiceUnavailable)
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			f, err := NewFiles(Endpoint{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			f.rt.sleep = func(context.Context, time.Duration) error { return nil }
			data := binaryData(70_000)
			err = f.Upload(context.Background(), "f.bin", tt.body(data), 0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Upload = %v, want error %v", err, tt.wantErr)
			}
			if got := requests.Load(); got != tt.wantRequests {
				t.Errorf("requests = %d, want %d", got, tt.wantRequests)
			}
			if tt.wantErr {
				return
			}
			if b, err := os.ReadFile(filepath.Join(d.root, "f.bin")); err != nil || !bytes.Equal(b, data) {
				t.Errorf("f.bin after retries: %d bytes, %v; want the %d bytes uploaded", len(b), err, len(data))
			}
		})
	}
}

func TestFilesEndpoint(t *testing.T) {
	tests := map[string]string{
		"a.txt":           "v1/files/a.txt",
		"dir/sub/f":       "v1/files/dir%2Fsub%2Ff",
		"/workspace/f":    "v1/files/%2Fworkspace%2Ff",
		".":               "v1/files/%2E",
		"..":              "v1/files/%2E%2E",
		"a/../b":          "v1/files/a%2F%2E%2E%2Fb",
		".hidden/x.y":     "v1/files/.hidden%2Fx.y",
		"sp ace%?#":       "v1/files/sp%20ace%25%3F%23",
		"ünï":             "v1/files/%C3%BCn%C3%AF",
		"":                "v1/files/",
		"./..x/...":       "v1/files/%2E%2F..x%2F...",
		"trailing/slash/": "v1/files/trailing%2Fslash%2F",
	}
	for in, want := range tests {
		if got := filesEndpoint(in); got != want {
			t.Errorf("filesEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSandboxFilesStrategy(t *testing.T) {
	routed := &Sandbox{c: &Client{opts: Options{RouterURL: "http://198.18.0.1:8080", RESTPort: 8080}}, namespace: "team", sandbox: "sb-7"}
	f, err := routed.Files()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.rt.headers.Get(HeaderSandboxPort); got != "8080" || f.rt.headers.Get(HeaderSandboxID) != "sb-7" {
		t.Errorf("routed Files headers = %v, want sandbox sb-7 on port 8080", f.rt.headers)
	}
	// No credentials Secret (credentials off): no Authorization header either.
	direct := &Sandbox{c: &Client{kube: fake.NewClientBuilder().Build(), opts: Options{RESTPort: 8081}}, sandbox: "sb-7", podIPs: []string{"198.18.0.7"}}
	if f, err = direct.Files(); err != nil || f.rt.base.String() != "http://198.18.0.7:8081" || len(f.rt.headers) != 0 {
		t.Errorf("direct Files = %v, %v; want http://198.18.0.7:8081 without router headers", f, err)
	}
	if _, err := (&Sandbox{c: &Client{}, sandbox: "sb-7"}).Files(); err == nil || !strings.Contains(err.Error(), "no pod IP") {
		t.Errorf("Files without a pod IP = %v, want an error saying so", err)
	}
}
