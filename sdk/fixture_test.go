package sdk

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// protocolFixture is a minimal stand-in for the legacy runtime API (reference §2.5) on
// 127.0.0.1. It exists only because the real daemon lives on another branch; it proves the
// SDK's HTTP mapping, not runtime behaviour. runtimeUnderTest uses the real sandboxd instead
// whenever PADDOCK_SANDBOXD_URL is set.
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
	mux.HandleFunc("POST /execute", f.execute)
	mux.HandleFunc("POST /upload", f.upload)
	mux.HandleFunc("GET /download/{path...}", f.download)
	mux.HandleFunc("GET /list/{path...}", f.list)
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

// execute splits on spaces only (enough for the tests' commands) and runs without a shell.
func (f *protocolFixture) execute(w http.ResponseWriter, r *http.Request) {
	var req struct{ Command string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	argv := strings.Fields(req.Command)
	cmd := exec.CommandContext(r.Context(), argv[0], argv[1:]...)
	cmd.Dir = f.root
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			stderr.WriteString(err.Error())
			code = 1
		} else {
			code = exit.ExitCode()
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"stdout": stdout.String(), "stderr": stderr.String(), "exit_code": code})
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

func (f *protocolFixture) list(w http.ResponseWriter, r *http.Request) {
	entries, err := os.ReadDir(f.resolve(r))
	if err != nil {
		http.Error(w, `{"message":"Directory not found"}`, http.StatusNotFound)
		return
	}
	out := []map[string]any{}
	for _, e := range entries {
		info, _ := e.Info()
		typ := "file"
		if e.IsDir() {
			typ = "directory"
		}
		out = append(out, map[string]any{"name": e.Name(), "size": info.Size(), "type": typ,
			"mod_time": float64(info.ModTime().UnixNano()) / 1e9})
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *protocolFixture) exists(w http.ResponseWriter, r *http.Request) {
	_, err := os.Stat(f.resolve(r))
	_ = json.NewEncoder(w).Encode(map[string]any{"path": r.PathValue("path"), "exists": err == nil})
}
