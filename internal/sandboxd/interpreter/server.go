package interpreter

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/api/sandboxd"
)

// Config configures the interpreter service.
type Config struct {
	// Python, Node and Bash are the commands the kernels run (looked up in PATH when bare).
	Python, Node, Bash string
	// Dir is the default working directory of contexts (the sandbox root, like commands').
	Dir string
	// Environ is the environment a kernel starts with ("K=V"): the one the sandbox's commands get.
	Environ func() []string
	// KeepaliveInterval is the silence after which /execute sends a keepalive line (E2B: 5 s).
	KeepaliveInterval time.Duration
	// InterruptGrace is how long an interrupted cell may take to stop after each SIGINT before the
	// next step (a second SIGINT, then killing the kernel).
	InterruptGrace time.Duration
	// MatplotlibCache is a directory of prebuilt matplotlib font caches (fontlist-*.json) that the
	// Python kernel copies into the user's matplotlib cache directory, where missing, before
	// matplotlib's first import; empty means sandboxd.MatplotlibFontCacheDir, where the
	// code-interpreter image has them. A directory that does not exist is no error.
	MatplotlibCache string
}

// maxBody bounds request bodies (the code of one cell).
const maxBody = 16 << 20

// Server is the interpreter service: its contexts and their kernels.
type Server struct {
	cfg Config

	mu       sync.Mutex
	contexts map[string]*codeContext
	order    []string
	defaults map[string]*codeContext // the default context of each language
	closed   bool
}

// New returns a server with the default python and javascript contexts (whose kernels start
// with their first cell, or at Warm).
func New(cfg Config) *Server {
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.Bash == "" {
		cfg.Bash = "/bin/bash"
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = 5 * time.Second
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = 5 * time.Second
	}
	if cfg.MatplotlibCache == "" {
		cfg.MatplotlibCache = sandboxd.MatplotlibFontCacheDir
	}
	s := &Server{cfg: cfg, contexts: map[string]*codeContext{}, defaults: map[string]*codeContext{}}
	for _, lang := range []string{Python, JavaScript} {
		s.defaults[lang] = s.add(lang, cfg.Dir)
	}
	return s
}

// Warm starts the default Python kernel, so that the first cell does not wait for the
// interpreter to start. sandboxd calls it as it starts serving, a warm pool member included,
// and again once the sandbox is claimed: a kernel that has run no cell yet then catches up with
// the claim's environment (started again at once when the change needs a new process, else
// applied with its first cell; see codeContext.current). While a cell runs, the cell does it.
func (s *Server) Warm() {
	s.mu.Lock()
	c := s.defaults[Python]
	s.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case c.turn <- struct{}{}:
	default:
		return
	}
	defer func() { <-c.turn }()
	if _, err := c.current(&s.cfg); err != nil && !errors.Is(err, errRemoved) {
		klog.ErrorS(err, "Starting the default Python kernel")
	}
}

// Close stops every kernel; the server answers nothing afterwards.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	all := make([]*codeContext, 0, len(s.contexts))
	for _, c := range s.contexts {
		all = append(all, c)
	}
	s.contexts, s.defaults, s.order = map[string]*codeContext{}, map[string]*codeContext{}, nil
	s.mu.Unlock()
	for _, c := range all {
		c.stop(stopShutdown)
	}
}

// add registers a new context (its kernel not started).
func (s *Server) add(lang, dir string) *codeContext {
	c := &codeContext{ID: newID(), Language: lang, Cwd: dir, turn: make(chan struct{}, 1)}
	s.contexts[c.ID] = c
	s.order = append(s.order, c.ID)
	return c
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Handler serves E2B's code-interpreter routes. It authorizes nothing: sandboxd wraps it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, "OK") })
	mux.HandleFunc("POST /execute", s.execute)
	mux.HandleFunc("POST /contexts", s.createContext)
	mux.HandleFunc("GET /contexts", s.listContexts)
	mux.HandleFunc("POST /contexts/{id}/restart", s.restartContext)
	mux.HandleFunc("DELETE /contexts/{id}", s.removeContext)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(encodeLine(v))
}

// writeText answers an error as E2B's server does: text/plain, which the SDK shows for 404.
func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

// errNotFound is E2B's 404 text for an unknown context.
func errNotFound(id string) string { return "Context " + id + " not found" }

func (s *Server) lookup(id string) (*codeContext, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contexts[id]
	return c, ok
}

// defaultContext is lang's default context, created when it was removed or never existed.
func (s *Server) defaultContext(lang string) (*codeContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the code interpreter is shutting down")
	}
	c := s.defaults[lang]
	if c == nil {
		c = s.add(lang, s.cfg.Dir)
		s.defaults[lang] = c
	}
	return c, nil
}

// contextRequest is the body of POST /contexts.
type contextRequest struct {
	Language *string `json:"language"`
	Cwd      *string `json:"cwd"`
}

// contextJSON is a context on the wire.
type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req contextRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeText(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	// The SDK sends Content-Type: application/json with an empty body on some calls.
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeText(w, http.StatusBadRequest, `the body must be a JSON object {"language"?: string, "cwd"?: string}: `+err.Error())
			return
		}
	}
	lang := NormalizeLanguage(deref(req.Language))
	if !supported(lang) {
		writeText(w, http.StatusBadRequest, "language: "+unsupportedMessage(lang))
		return
	}
	dir := s.cfg.Dir
	if cwd := deref(req.Cwd); cwd != "" {
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(s.cfg.Dir, cwd)
		}
		dir = filepath.Clean(cwd)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("cwd %q is not a directory in the sandbox; create it first or pass an existing one", dir))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeText(w, http.StatusServiceUnavailable, "the code interpreter is shutting down")
		return
	}
	c := s.add(lang, dir)
	s.mu.Unlock()
	if _, err := c.kernel(&s.cfg); err != nil {
		s.forget(c)
		writeText(w, http.StatusInternalServerError, "Failed to create context: "+err.Error())
		return
	}
	writeJSON(w, contextJSON{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) listContexts(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make([]contextJSON, 0, len(s.order))
	for _, id := range s.order {
		c := s.contexts[id]
		out = append(out, contextJSON{ID: c.ID, Language: c.Language, Cwd: c.Cwd})
	}
	s.mu.Unlock()
	writeJSON(w, out)
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.lookup(id)
	if !ok {
		writeText(w, http.StatusNotFound, errNotFound(id))
		return
	}
	if err := c.restart(&s.cfg); err != nil {
		writeText(w, http.StatusInternalServerError, "Failed to restart context: "+err.Error())
		return
	}
	writeJSON(w, nil)
}

func (s *Server) removeContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.lookup(id)
	if !ok {
		writeText(w, http.StatusNotFound, errNotFound(id))
		return
	}
	s.forget(c)
	c.stop(stopRemoved)
	writeJSON(w, nil)
}

// forget removes c from the server (and from the defaults).
func (s *Server) forget(c *codeContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.contexts, c.ID)
	for i, id := range s.order {
		if id == c.ID {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	if s.defaults[c.Language] == c {
		delete(s.defaults, c.Language)
	}
}
