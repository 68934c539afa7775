package envd

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/sandboxd/files"
)

// uploaded is one element of POST /files' answer.
type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// restFailure writes a Connect-style failure as envd's REST error.
func restFailure(w http.ResponseWriter, err error) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeInternal, err)
	}
	writeError(w, httpStatus(ce), ce.Message())
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	if user, ok := requestUser(r); !ok {
		writeError(w, http.StatusUnauthorized, fmt.Sprintf("user %q does not exist in this sandbox; use \"user\" or \"root\"", user))
		return
	}
	userPath := r.URL.Query().Get("path")
	if userPath == "" {
		writeError(w, http.StatusBadRequest, "query parameter path is required")
		return
	}
	rel, err := s.paths.resolve(userPath)
	if err != nil {
		restFailure(w, pathError("path", userPath, err))
		return
	}
	info, err := s.cfg.Root.FS().Stat(rel)
	if err != nil {
		restFailure(w, fsError("path", userPath, err))
		return
	}
	if !info.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path %q is not a regular file; list a directory with ListDir", userPath))
		return
	}
	// O_NONBLOCK: a FIFO swapped in after the check must not block the handler.
	f, err := s.cfg.Root.FS().OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		restFailure(w, fsError("path", userPath, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(rel)}))
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		// BestSpeed: fetch() asks for gzip on every download, and the default level costs more
		// CPU than loopback or a pod network saves.
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if _, err := io.Copy(zw, f); err == nil {
			_ = zw.Close()
		}
		return
	}
	http.ServeContent(w, r, "", info.ModTime(), f)
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func (s *Server) postFiles(w http.ResponseWriter, r *http.Request) {
	if user, ok := requestUser(r); !ok {
		writeError(w, http.StatusUnauthorized, fmt.Sprintf("user %q does not exist in this sandbox; use \"user\" or \"root\"", user))
		return
	}
	queryPath := r.URL.Query().Get("path")
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []uploaded
	var err error
	if mediaType == "multipart/form-data" {
		out, err = s.writeParts(multipart.NewReader(r.Body, params["boundary"]), queryPath)
	} else {
		var one uploaded
		one, err = s.writeBody(r, queryPath)
		out = []uploaded{one}
	}
	if err != nil {
		restFailure(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, out)
}

// writeParts writes every "file" part: to the path query parameter when it is given, else to the
// part's file name (the SDK sends the full target path there, with several files per request).
func (s *Server) writeParts(mr *multipart.Reader, queryPath string) ([]uploaded, error) {
	var out []uploaded
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("malformed multipart body: %w", err))
		}
		if part.FormName() != "file" {
			continue
		}
		target := queryPath
		if target == "" {
			target = rawFileName(part)
		}
		done, err := s.writeFile(target, part)
		if err != nil {
			return nil, err
		}
		out = append(out, done)
	}
	if len(out) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(`multipart body has no "file" part`))
	}
	return out, nil
}

// rawFileName is the part's filename parameter as sent; multipart.Part.FileName keeps only its
// last element, and here the whole path matters.
func rawFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeBody writes a raw (octet-stream) body to the path query parameter, unzipping it when it
// is sent with Content-Encoding: gzip.
func (s *Server) writeBody(r *http.Request, queryPath string) (uploaded, error) {
	var body io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return uploaded{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("body is not valid gzip: %w", err))
		}
		defer zr.Close()
		body = zr
	default:
		return uploaded{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("Content-Encoding %q is not supported; send gzip or nothing", enc))
	}
	return s.writeFile(queryPath, body)
}

// writeFile atomically writes one uploaded file, within the upload limit.
func (s *Server) writeFile(userPath string, body io.Reader) (uploaded, error) {
	if userPath == "" {
		return uploaded{}, connect.NewError(connect.CodeInvalidArgument, errors.New("the target path is missing: pass ?path= or name the file part with the full path"))
	}
	rel, err := s.paths.resolve(userPath)
	if err != nil {
		return uploaded{}, pathError("path", userPath, err)
	}
	if err := files.Write(s.cfg.Root, rel, 0o644, body, s.cfg.MaxUploadBytes); err != nil {
		switch {
		case errors.Is(err, files.ErrTooLarge):
			return uploaded{}, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s: %w; raise sandboxd's --max-upload-bytes or send less", userPath, err))
		case errors.Is(err, files.ErrIsDirectory):
			return uploaded{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q is a directory", userPath))
		}
		return uploaded{}, fsError("path", userPath, err)
	}
	shown := s.paths.display(rel)
	return uploaded{Path: shown, Name: path.Base(shown), Type: "file"}, nil
}
