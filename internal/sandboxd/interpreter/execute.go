package interpreter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// executeRequest is the body of POST /execute; the Python SDK sends null for what is unset.
type executeRequest struct {
	Code      json.RawMessage   `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// validationError is FastAPI's 422 body, which E2B's server answers for a missing code.
func validationError(w http.ResponseWriter, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_, _ = w.Write(encodeLine(map[string]any{"detail": []map[string]any{{"type": "invalid", "loc": []string{"body", field}, "msg": msg}}}))
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeText(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req executeRequest
	var code string
	if err := json.Unmarshal(body, &req); err != nil {
		validationError(w, "body", `the body must be a JSON object {"code": string, "context_id"?: string, "language"?: string, "env_vars"?: {string: string}}: `+err.Error())
		return
	}
	if json.Unmarshal(req.Code, &code) != nil {
		validationError(w, "code", "code is required and must be a string: the source of the cell to run")
		return
	}
	if msg := checkEnv(req.EnvVars); msg != "" {
		writeText(w, http.StatusBadRequest, msg)
		return
	}
	lang, id := deref(req.Language), deref(req.ContextID)
	var c *codeContext
	switch {
	case lang != "" && id != "":
		writeText(w, http.StatusBadRequest, "pass context_id or language, not both: a context has its own language")
		return
	case id != "":
		var ok bool
		if c, ok = s.lookup(id); !ok {
			writeText(w, http.StatusNotFound, errNotFound(id))
			return
		}
	default:
		if lang = NormalizeLanguage(lang); supported(lang) {
			if c, err = s.defaultContext(lang); err != nil {
				writeText(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
	}
	out := newLineWriter(w, s.cfg.KeepaliveInterval)
	defer out.close()
	if c == nil {
		out.write(errorLine("UnsupportedLanguage", unsupportedMessage(lang), ""))
	} else {
		s.run(r.Context(), c, code, req.EnvVars, out)
	}
	out.write(typeLine(lineEnd))
}

// checkEnv returns what is wrong with per-call environment variables, or "".
func checkEnv(env map[string]string) string {
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !envName.MatchString(name) {
			return fmt.Sprintf("env_vars: %q is not a valid variable name; use letters, digits and underscores, not starting with a digit", name)
		}
		if strings.ContainsRune(env[name], 0) {
			return fmt.Sprintf("env_vars: the value of %q contains a NUL byte, which an environment variable cannot hold", name)
		}
	}
	return ""
}

// run runs one cell in c once the context's previous cells are done, writing its lines to out.
// When the client goes away the cell is interrupted (SIGINT, like E2B's kernel interrupt) and the
// context keeps its state.
func (s *Server) run(ctx context.Context, c *codeContext, code string, env map[string]string, out *lineWriter) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-c.turn }()
	out.write(executionsLine(c.next()))
	k, err := c.current(&s.cfg)
	if err != nil {
		out.write(errorLine("KernelStartFailed", err.Error(), ""))
		return
	}
	if err := k.waitReady(ctx); err != nil {
		if ctx.Err() == nil {
			out.write(errorLine("KernelStartFailed", fmt.Sprintf("%v; check that the %s interpreter runs in this sandbox", err, c.Language), ""))
		}
		return
	}
	errored := false
	emit := func(m message) {
		switch m.Type {
		case lineStdout, lineStderr:
			out.write(streamLine(m.Type, m.Text, time.Now()))
		case lineResult:
			out.write(resultLine(m.Data, m.Main))
		case lineError:
			// E2B reports the first error of a cell.
			if !errored {
				errored = true
				out.write(errorLine(m.Name, m.Value, m.Traceback))
			}
		}
	}
	outcome, done, err := k.execute(ctx, code, env, s.cfg.InterruptGrace, emit)
	switch outcome {
	case cellDone:
		if k.shell && done.Status != 0 && !errored {
			// bash_kernel's report of a failed cell: no name, the exit status as the value.
			out.write(errorLine("", strconv.Itoa(done.Status), ""))
		}
	case cellExited:
		switch k.stopped() {
		case stopRestarted:
			out.write(errorLine("ContextRestarting", "Context was restarted", ""))
		case stopRemoved, stopShutdown:
			out.write(errorLine("ExecutionAborted", "Execution was aborted", ""))
		default:
			out.write(errorLine("KernelDied", fmt.Sprintf("%v while running this cell; the context was restarted and its state is lost", err), ""))
			s.restartAfterCrash(c)
		}
	case cellAbandoned:
		if k.stopped() == stopInterruptFailed {
			s.restartAfterCrash(c)
		}
	}
}

// restartAfterCrash starts the context's next kernel now, so the next cell finds it ready.
func (s *Server) restartAfterCrash(c *codeContext) {
	if _, err := c.kernel(&s.cfg); err != nil && !errors.Is(err, errRemoved) {
		klog.ErrorS(err, "Restarting a kernel after it died", "context", c.ID, "language", c.Language)
	}
}

// lineWriter writes NDJSON lines to the response, flushing each, and a keepalive line after every
// interval of silence. Once a write fails (the client went away) it writes nothing more.
type lineWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	flusher http.Flusher
	timer   *time.Timer
	every   time.Duration
	failed  bool
	closed  bool
}

func newLineWriter(w http.ResponseWriter, every time.Duration) *lineWriter {
	// E2B's server sends the stream without a Content-Type; nil keeps Go from sniffing one.
	w.Header()["Content-Type"] = nil
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{w: w, every: every}
	lw.flusher, _ = w.(http.Flusher)
	if lw.flusher != nil {
		lw.flusher.Flush()
	}
	lw.timer = time.AfterFunc(every, lw.keepalive)
	return lw
}

func (lw *lineWriter) keepalive() {
	lw.write(typeLine(lineKeepalive))
}

func (lw *lineWriter) write(line []byte) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.failed || lw.closed {
		return
	}
	if _, err := lw.w.Write(line); err != nil {
		lw.failed = true
		return
	}
	if lw.flusher != nil {
		lw.flusher.Flush()
	}
	lw.timer.Reset(lw.every)
}

// close stops the keepalives; the handler's last write must come before.
func (lw *lineWriter) close() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	lw.timer.Stop()
}
