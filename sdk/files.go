package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// defaultRESTPort is sandboxd's REST filesystem API port (/v1/files).
const defaultRESTPort = 8080

// ErrIsDirectory is returned by Files.Download for a directory: list it and download its files.
var ErrIsDirectory = errors.New("is a directory")

// Files moves files in and out of one sandbox over sandboxd's REST filesystem API
// (GET, PUT, DELETE and HEAD /v1/files/{path}, reference §2.3). Unlike Runtime's legacy file
// calls it streams bodies of any size, keeps file modes and creates directories.
//
// Paths are relative to the sandbox root (sandboxd's --root-dir, /workspace in the templates);
// an absolute path that names a place under the root ("/workspace/out") is accepted as well.
// sandboxd refuses a path that leaves the root with 403, which matches ErrPermissionDenied.
type Files struct {
	rt *Runtime
}

// NewFiles returns Files for the sandboxd REST API at e.URL, e.g. http://198.18.0.5:8080, or
// for the router at e.URL when e.Sandbox is set (e.Port, default 8080, is then sent as
// X-Sandbox-Port).
func NewFiles(e Endpoint) (*Files, error) {
	rt, err := newRuntime(e, defaultRESTPort)
	if err != nil {
		return nil, err
	}
	return &Files{rt: rt}, nil
}

// FileInfo describes a file or directory in the sandbox.
type FileInfo struct {
	// Name is the last element of the path ("" for the sandbox root).
	Name  string
	Size  int64
	IsDir bool
	// Mode holds the permission bits (0644); the type is in IsDir.
	Mode    fs.FileMode
	ModTime time.Time
}

// Stat describes path; a missing path is an *HTTPError matching ErrFileNotFound.
func (f *Files) Stat(ctx context.Context, path string) (*FileInfo, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	var info *FileInfo
	err := f.rt.send(ctx, "stat "+path, true, http.MethodHead, filesEndpoint(path), "", nil, func(resp *http.Response) (err error) {
		info, err = headerInfo(path, resp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// headerInfo reads the file description sandboxd puts in the headers of GET and HEAD.
func headerInfo(path string, resp *http.Response) (*FileInfo, error) {
	mode, err := strconv.ParseUint(resp.Header.Get("X-File-Mode"), 8, 32)
	if err != nil {
		return nil, fmt.Errorf("X-File-Mode %q is not an octal mode; is this sandboxd's REST API (port 8080)?", resp.Header.Get("X-File-Mode"))
	}
	info := &FileInfo{Name: baseName(path), Mode: fs.FileMode(mode).Perm()}
	switch resp.Header.Get("X-File-Type") {
	case "directory":
		info.IsDir = true
	case "file":
		info.Size = resp.ContentLength
	default:
		return nil, fmt.Errorf("X-File-Type %q: want file or directory; is this sandboxd's REST API (port 8080)?", resp.Header.Get("X-File-Type"))
	}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		info.ModTime = t.UTC()
	}
	return info, nil
}

// List returns the entries of the directory dir ("." or "" for the root), sorted by name.
// Symlinks appear as what they point to; links that dangle or leave the root are left out.
func (f *Files) List(ctx context.Context, dir string) ([]FileInfo, error) {
	if dir == "" {
		dir = "."
	}
	if err := checkPath(dir); err != nil {
		return nil, err
	}
	var wire struct {
		Entries []struct {
			Name       string `json:"name"`
			Size       int64  `json:"size"`
			Type       string `json:"type"`
			ModifiedAt string `json:"modified_at"`
			Mode       string `json:"mode"`
		} `json:"entries"`
	}
	err := f.rt.send(ctx, "list "+dir, true, http.MethodGet, filesEndpoint(dir), "", nil, func(resp *http.Response) error {
		if resp.Header.Get("X-File-Type") != "directory" {
			return fmt.Errorf("%q is not a directory", dir)
		}
		return json.NewDecoder(io.LimitReader(resp.Body, maxJSONResponse)).Decode(&wire)
	})
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(wire.Entries))
	for _, e := range wire.Entries {
		mode, err := strconv.ParseUint(e.Mode, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("sandbox runtime: list %s: entry %q has mode %q, want octal digits", dir, e.Name, e.Mode)
		}
		mod, _ := time.Parse(time.RFC3339Nano, e.ModifiedAt) // zero when the daemon sent none
		out = append(out, FileInfo{Name: e.Name, Size: e.Size, IsDir: e.Type == "directory", Mode: fs.FileMode(mode).Perm(), ModTime: mod})
	}
	return out, nil
}

// Download copies the file at path to w and returns the number of bytes copied and the file's
// description. A directory is ErrIsDirectory. Failures before the first byte are retried; a
// transfer that breaks in the middle is not, since w already holds part of the file.
func (f *Files) Download(ctx context.Context, path string, w io.Writer) (int64, *FileInfo, error) {
	if err := checkPath(path); err != nil {
		return 0, nil, err
	}
	var n int64
	var info *FileInfo
	err := f.rt.send(ctx, "download "+path, true, http.MethodGet, filesEndpoint(path), "", nil, func(resp *http.Response) (err error) {
		if info, err = headerInfo(path, resp); err != nil {
			return err
		}
		if info.IsDir {
			return fmt.Errorf("%q %w; list it and download its files", path, ErrIsDirectory)
		}
		n, err = io.Copy(w, resp.Body)
		if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
			err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
		}
		return err
	})
	return n, info, err
}

// Upload writes body to the file at path with permission bits mode (0644 when 0), creating
// missing parent directories. sandboxd writes to a temporary file and renames it, so readers
// never see half a file. An io.Seeker body (an *os.File) is rewound and sent again when the
// upload fails in a way that may be retried; any other body is sent once.
func (f *Files) Upload(ctx context.Context, path string, body io.Reader, mode fs.FileMode) error {
	if err := checkFilePath(path); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	endpoint := filesEndpoint(path) + "?mode=" + fmt.Sprintf("%04o", mode.Perm())
	return f.rt.send(ctx, "upload "+path, true, http.MethodPut, endpoint, "application/octet-stream", body, nil)
}

// Mkdir creates the directory path and its missing parents with permission bits mode (0755
// when 0). An existing directory is fine; an existing file is a 409 *HTTPError.
func (f *Files) Mkdir(ctx context.Context, path string, mode fs.FileMode) error {
	if err := checkFilePath(path); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o755
	}
	endpoint := filesEndpoint(path) + "?type=directory&mode=" + fmt.Sprintf("%04o", mode.Perm())
	return f.rt.send(ctx, "mkdir "+path, true, http.MethodPut, endpoint, "", nil, nil)
}

// Remove deletes path; a non-empty directory needs recursive. The root itself is only cleared,
// and only when recursive.
func (f *Files) Remove(ctx context.Context, path string, recursive bool) error {
	if err := checkFilePath(path); err != nil {
		return err
	}
	endpoint := filesEndpoint(path)
	if recursive {
		endpoint += "?recursive=true"
	}
	return f.rt.send(ctx, "remove "+path, true, http.MethodDelete, endpoint, "", nil, nil)
}

func checkFilePath(p string) error {
	if strings.Trim(p, "/") == "" || p == "." {
		return fmt.Errorf("path %q names the sandbox root; name a file or directory under it", p)
	}
	return checkPath(p)
}

// filesEndpoint is the /v1/files URL path of p. Every byte outside the unreserved set is
// percent-encoded, "/" included, so neither "..", "." nor a leading "/" is cleaned away by a
// proxy or by sandboxd's router before sandboxd itself confines the path (reference §2.3).
func filesEndpoint(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.WriteString("v1/files/")
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' || (c == '.' && !dotSegment(p, i)) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// dotSegment reports whether the '.' at p[i] belongs to a path segment that is "." or "..",
// which must be encoded so that no HTTP layer resolves it.
func dotSegment(p string, i int) bool {
	start := strings.LastIndexByte(p[:i], '/') + 1
	end := strings.IndexByte(p[i:], '/')
	if end < 0 {
		end = len(p)
	} else {
		end += i
	}
	seg := p[start:end]
	return seg == "." || seg == ".."
}

func baseName(p string) string {
	p = strings.TrimRight(p, "/")
	return p[strings.LastIndexByte(p, '/')+1:]
}
