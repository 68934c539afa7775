package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/files"
)

// RESTHandler serves the filesystem and runtime API.
func (d *Daemon) RESTHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/files/{path...}", d.getFile) // GET patterns also serve HEAD
	mux.HandleFunc("PUT /v1/files/{path...}", d.putFile)
	mux.HandleFunc("DELETE /v1/files/{path...}", d.deleteFile)
	mux.HandleFunc("GET /v1/health", d.health)
	mux.HandleFunc("GET /v1/metadata", d.getMetadata)
	mux.HandleFunc("PUT "+sandboxd.ClaimSettingsPath, d.putClaimSettings)
	mux.HandleFunc("GET "+sandboxd.ClaimSettingsPath, d.getClaimSettings)
	mux.HandleFunc("GET "+sandboxd.ActivityPath, d.getActivity)
	mux.HandleFunc("POST "+sandboxd.KeepalivePath, d.keepalive)
	d.registerProcessRoutes(mux)
	// Only authorized calls count: an unauthenticated caller cannot keep a sandbox awake.
	return d.requireToken(d.trackActivity(mux, "/v1/health", sandboxd.ActivityPath), "/v1/health")
}

// directoryListing is the wire type DirectoryListing.
type directoryListing struct {
	Path    string        `json:"path"`
	Entries []files.Entry `json:"entries"`
}

func (d *Daemon) getFile(w http.ResponseWriter, r *http.Request) {
	wild := r.PathValue("path")
	rel, err := d.root.ResolveContext(r.Context(), wild)
	if err != nil {
		writeFileError(w, err)
		return
	}
	f, err := openReadable(d.root.FS(), rel)
	if err != nil {
		writeFileError(w, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		writeFileError(w, err)
		return
	}
	entry := files.NewEntry(info.Name(), info)
	w.Header().Set("X-File-Type", entry.Type)
	w.Header().Set("X-File-Mode", entry.Mode)
	if !info.IsDir() {
		// Set before ServeContent so it does not sniff the content type.
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", info.ModTime(), f)
		return
	}
	entries, err := files.List(d.root, rel)
	if err != nil {
		writeFileError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, directoryListing{Path: "/" + wild, Entries: entries})
}

func (d *Daemon) putFile(w http.ResponseWriter, r *http.Request) {
	mode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
		return
	}
	kind := r.URL.Query().Get("type")
	if kind != "" && kind != "file" && kind != "directory" {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, fmt.Sprintf("query parameter type=%q must be \"file\" or \"directory\"", kind))
		return
	}
	rel, err := d.root.ResolveContext(r.Context(), r.PathValue("path"))
	if err != nil {
		writeFileError(w, err)
		return
	}
	if kind == "directory" {
		if err := files.Mkdir(d.root, rel, mode|0o700); err != nil {
			writePutError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	limit := d.cfg.MaxUploadBytes
	if limit > 0 && r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, codeResourceExhausted,
			fmt.Sprintf("upload of %d bytes exceeds the limit of %d bytes; raise --max-upload-bytes or send less", r.ContentLength, limit))
		return
	}
	body, err := uploadBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
		return
	}
	if err := files.Write(d.root, rel, mode, body, limit); err != nil {
		writePutError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writePutError reports a parent that is a file as a conflict rather than as "not found".
func writePutError(w http.ResponseWriter, err error) {
	if errors.Is(err, syscall.ENOTDIR) {
		writeError(w, http.StatusConflict, codeConflict, "a parent of the path is a file, not a directory")
		return
	}
	writeFileError(w, err)
}

// parseMode parses the mode query parameter ("0644" when empty).
func parseMode(s string) (fs.FileMode, error) {
	if s == "" {
		return 0o644, nil
	}
	if len(s) != 4 || s[0] != '0' {
		return 0, fmt.Errorf("query parameter mode=%q must match ^0[0-7]{3}$, for example 0644", s)
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("query parameter mode=%q must match ^0[0-7]{3}$, for example 0644", s)
	}
	return fs.FileMode(m), nil
}

// uploadBody is the raw body, or the "file" part of a multipart/form-data body.
func uploadBody(r *http.Request) (io.Reader, error) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		return r.Body, nil
	}
	part, err := filePart(multipart.NewReader(r.Body, params["boundary"]))
	if err != nil {
		return nil, err
	}
	return part, nil
}

func filePart(mr *multipart.Reader) (*multipart.Part, error) {
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errors.New(`multipart body is missing the required "file" part`)
		}
		if err != nil {
			return nil, fmt.Errorf("malformed multipart body: %w", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
	}
}

func (d *Daemon) deleteFile(w http.ResponseWriter, r *http.Request) {
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, fmt.Sprintf("query parameter recursive=%q must be true or false", v))
			return
		}
		recursive = b
	}
	rel, err := d.root.ResolveNoFollowContext(r.Context(), r.PathValue("path"))
	if err != nil {
		writeFileError(w, err)
		return
	}
	if err := files.Delete(d.root, rel, recursive); err != nil {
		writeFileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Daemon) health(w http.ResponseWriter, _ *http.Request) {
	if !d.ready.Load() {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "sandboxd is shutting down")
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"status": "ok", "uptime_seconds": int64(time.Since(d.started).Seconds())})
}

func (d *Daemon) getMetadata(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"env": d.metadata})
}

func (d *Daemon) putClaimSettings(w http.ResponseWriter, r *http.Request) {
	if !d.controlAuthorized(w, r) {
		return
	}
	var s claim.Settings
	if err := decodeJSON(w, r, &s); err != nil {
		writeError(w, decodeStatus(err), decodeCode(err), err.Error())
		return
	}
	if err := d.claims.Apply(d.root, s); err != nil {
		switch {
		case errors.Is(err, claim.ErrOtherClaim):
			writeError(w, http.StatusConflict, codeConflict, err.Error())
		case s.Validate() != nil:
			writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
		default:
			status, code, _ := fileError(err)
			writeError(w, status, code, err.Error())
		}
		return
	}
	if d.locked.CompareAndSwap(true, false) {
		close(d.claimed) // the calls awaitClaim holds go on
		klog.InfoS("claimed: sandboxd serves the sandbox token from now on", "claim", s.ClaimName, "claimUID", s.ClaimUID)
		if d.interp != nil {
			// The kernel started before the claim catches up with the claim's environment.
			go d.interp.Warm()
		}
	}
	status, _ := d.claims.Current()
	httpjson.Write(w, http.StatusOK, status)
}

func (d *Daemon) getClaimSettings(w http.ResponseWriter, r *http.Request) {
	if !d.controlAuthorized(w, r) {
		return
	}
	status, ok := d.claims.Current()
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "no claim settings have been applied to this sandbox")
		return
	}
	httpjson.Write(w, http.StatusOK, status)
}

// decodeJSON decodes a bounded JSON body, refusing unknown fields and trailing data.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("malformed JSON body: unexpected data after the JSON object")
	}
	return nil
}

func decodeStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func decodeCode(err error) string {
	if decodeStatus(err) == http.StatusRequestEntityTooLarge {
		return codeResourceExhausted
	}
	return codeInvalidArgument
}

// errNotRegular is returned for devices, sockets and FIFOs, which cannot be downloaded.
var errNotRegular = errors.New("path is neither a regular file nor a directory")

// openReadable opens a regular file or directory. It checks first, because opening a FIFO that
// a sandbox process created would block the handler until something writes to it.
func openReadable(r *os.Root, rel string) (*os.File, error) {
	info, err := r.Stat(rel)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() && !info.IsDir() {
		return nil, errNotRegular
	}
	return r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
