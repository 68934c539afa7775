package sdk

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// protocolFixture is a minimal stand-in for the legacy runtime API (reference §2.5) on
// 127.0.0.1, used only where the real daemon cannot serve the test: recording the headers a
// router would see, and injecting 5xx answers for the retry tests. Runtime behaviour is tested
// against the real sandboxd (runtimeUnderTest).
type protocolFixture struct {
	root string
	mu   sync.Mutex
	reqs []*http.Request // every request, for header assertions
	// fail, when set, answers a request instead of the handler (error injection).
	fail func(r *http.Request) (status int, ok bool)
}

func newProtocolFixture(t *testing.T) (*protocolFixture, *httptest.Server) {
	f := &protocolFixture{root: t.TempDir()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /upload", f.upload)
	mux.HandleFunc("GET /download/{path...}", f.download)
	mux.HandleFunc("GET /exists/{path...}", f.exists)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Clone(r.Context()))
		fail := f.fail
		f.mu.Unlock()
		if fail != nil {
			if status, ok := fail(r); ok {
				http.Error(w, `{"detail":"injected"}`, status)
				return
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *protocolFixture) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

func (f *protocolFixture) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "file" {
		http.Error(w, "want a part named file", http.StatusUnprocessableEntity)
		return
	}
	// FileName() drops directories; the legacy API keeps a relative sub-path.
	_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	name := params["filename"]
	p := filepath.Join(f.root, filepath.Clean("/"+name))
	data, _ := io.ReadAll(part)
	if err := errors.Join(os.MkdirAll(filepath.Dir(p), 0o755), os.WriteFile(p, data, 0o644)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"message": "uploaded"})
}

func (f *protocolFixture) resolve(r *http.Request) string {
	return filepath.Join(f.root, filepath.Clean("/"+r.PathValue("path")))
}

func (f *protocolFixture) download(w http.ResponseWriter, r *http.Request) {
	data, err := os.ReadFile(f.resolve(r))
	if err != nil {
		http.Error(w, `{"message":"File not found"}`, http.StatusNotFound)
		return
	}
	_, _ = w.Write(data)
}

func (f *protocolFixture) exists(w http.ResponseWriter, r *http.Request) {
	_, err := os.Stat(f.resolve(r))
	_ = json.NewEncoder(w).Encode(map[string]any{"path": r.PathValue("path"), "exists": err == nil})
}
