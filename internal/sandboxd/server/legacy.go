package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"time"

	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/sandboxd/files"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
	"github.com/paddock-dev/paddock/internal/sandboxd/shlex"
)

// LegacyHandler serves the API of the Python runtime (examples/python-runtime-sandbox) that the
// SDKs still default to, on the sandbox root instead of /app.
func (d *Daemon) LegacyHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok", "message": "Sandbox Runtime is active."})
	})
	mux.HandleFunc("POST /execute", d.legacyExecute)
	mux.HandleFunc("POST /upload", d.legacyUpload)
	mux.HandleFunc("GET /download/{path...}", d.legacyDownload)
	mux.HandleFunc("GET /list/{path...}", d.legacyList)
	mux.HandleFunc("GET /exists/{path...}", d.legacyExists)
	return d.requireToken(d.trackActivity(mux, "/"), "/")
}

type legacyMessage struct {
	Message string `json:"message"`
}

var legacyDenied = legacyMessage{Message: "Access denied"}

type legacyExecuteRequest struct {
	Command *string `json:"command"`
}

type legacyExecuteResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// legacyValidation mimics FastAPI's 422 body closely enough for clients that print it.
func legacyValidation(w http.ResponseWriter, field, msg string) {
	httpjson.Write(w, http.StatusUnprocessableEntity, map[string]any{
		"detail": []map[string]any{{"loc": []string{"body", field}, "msg": msg, "type": "value_error"}},
	})
}

func (d *Daemon) legacyExecute(w http.ResponseWriter, r *http.Request) {
	var req legacyExecuteRequest
	if err := decodeJSON(w, r, &req); err != nil {
		if decodeStatus(err) == http.StatusRequestEntityTooLarge {
			httpjson.Write(w, http.StatusRequestEntityTooLarge, legacyMessage{Message: fmt.Sprintf("request body exceeds %d bytes", maxJSONBody)})
			return
		}
		legacyValidation(w, "command", err.Error())
		return
	}
	if req.Command == nil {
		legacyValidation(w, "command", `field "command" (a string) is required`)
		return
	}
	res, err := d.runLegacy(r.Context(), *req.Command)
	var tooMany *process.TooManyProcessesError
	if errors.As(err, &tooMany) {
		httpjson.Write(w, http.StatusTooManyRequests, legacyMessage{Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// Streamed: the escaped body is never held in memory, only the capped raw output.
	_ = writeLegacyExecuteResponse(w, res.Stdout, res.Stderr, res.ExitCode)
}

// runLegacy splits command like shlex.split and runs it without a shell in the root; any failure
// becomes exit code 1 with the reason in stderr, as the Python runtime reports it, except a start
// refused by --max-processes, which is returned as the error.
func (d *Daemon) runLegacy(ctx context.Context, command string) (process.Result, error) {
	failed := func(err error) (process.Result, error) {
		return process.Result{Stderr: []byte("Failed to execute command: " + err.Error()), ExitCode: 1}, nil
	}
	argv, err := shlex.Split(command)
	if err != nil {
		return failed(err)
	}
	if len(argv) == 0 {
		return failed(errors.New("empty command"))
	}
	timeout := d.cfg.LegacyExecTimeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec := process.Spec{Command: argv, Env: process.MergeEnv(d.cfg.Environ, d.claims.Env()), Dir: d.root.Dir()}
	res, err := d.procs.Run(ctx, spec, d.cfg.MaxExecuteOutputBytes)
	var tooMany *process.TooManyProcessesError
	switch {
	case errors.As(err, &tooMany):
		return process.Result{}, err
	case err != nil:
		return failed(err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failed(fmt.Errorf("command timed out after %v and its process group was killed", timeout))
	}
	return res, nil
}

// legacyResolve confines p like the Python runtime: an absolute path outside the root is an
// escape rather than being re-rooted.
func (d *Daemon) legacyResolve(ctx context.Context, p string) (string, error) {
	if _, inside := pathsafe.Within(d.root.Dir(), p); filepath.IsAbs(p) && !inside {
		return "", pathsafe.ErrEscapes
	}
	return d.root.ResolveContext(ctx, p)
}

// writeLegacyResolveError answers a path legacyResolve refused: 400 for one over the length
// limits, the Python runtime's 403 "Access denied" otherwise.
func writeLegacyResolveError(w http.ResponseWriter, err error) {
	if errors.Is(err, pathsafe.ErrTooLong) {
		httpjson.Write(w, http.StatusBadRequest, legacyMessage{Message: err.Error()})
		return
	}
	httpjson.Write(w, http.StatusForbidden, legacyDenied)
}

func (d *Daemon) legacyUpload(w http.ResponseWriter, r *http.Request) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		legacyValidation(w, "file", "the body must be multipart/form-data with a part named \"file\"")
		return
	}
	part, err := filePart(multipart.NewReader(r.Body, params["boundary"]))
	if err != nil {
		legacyValidation(w, "file", err.Error())
		return
	}
	name := rawFileName(part)
	if name == "" {
		legacyValidation(w, "file", "the \"file\" part needs a filename")
		return
	}
	rel, err := d.legacyResolve(r.Context(), name)
	if err != nil {
		writeLegacyResolveError(w, err)
		return
	}
	if err := files.Write(d.root, rel, 0o644, part, d.cfg.MaxUploadBytes); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, files.ErrTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		httpjson.Write(w, status, legacyMessage{Message: "File upload failed: " + err.Error()})
		return
	}
	httpjson.Write(w, http.StatusOK, legacyMessage{Message: fmt.Sprintf("File '%s' uploaded successfully.", name)})
}

func (d *Daemon) legacyDownload(w http.ResponseWriter, r *http.Request) {
	rel, err := d.legacyResolve(r.Context(), r.PathValue("path"))
	if err != nil {
		writeLegacyResolveError(w, err)
		return
	}
	f, err := openReadable(d.root.FS(), rel)
	if err == nil {
		defer f.Close()
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(rel)}))
			http.ServeContent(w, r, "", info.ModTime(), f)
			return
		}
	}
	httpjson.Write(w, http.StatusNotFound, legacyMessage{Message: "File not found"})
}

type legacyEntry struct {
	Name    string  `json:"name"`
	Size    int64   `json:"size"`
	Type    string  `json:"type"`
	ModTime float64 `json:"mod_time"`
}

func (d *Daemon) legacyList(w http.ResponseWriter, r *http.Request) {
	rel, err := d.legacyResolve(r.Context(), r.PathValue("path"))
	if err != nil {
		writeLegacyResolveError(w, err)
		return
	}
	entries, err := files.List(d.root, rel)
	if err != nil {
		httpjson.Write(w, http.StatusNotFound, legacyMessage{Message: "Directory not found"})
		return
	}
	out := make([]legacyEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, legacyEntry{Name: e.Name, Size: e.Size, Type: e.Type, ModTime: float64(e.ModTime.UnixNano()) / 1e9})
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (d *Daemon) legacyExists(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	rel, err := d.legacyResolve(r.Context(), p)
	if err != nil {
		writeLegacyResolveError(w, err)
		return
	}
	_, statErr := d.root.FS().Stat(rel)
	httpjson.Write(w, http.StatusOK, map[string]any{"path": p, "exists": statErr == nil})
}

// rawFileName is the part's filename as sent: the legacy runtime accepts a relative sub-path
// there, which multipart.Part.FileName strips to its last element.
func rawFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}
