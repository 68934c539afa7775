package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultRuntimePort is the legacy runtime API's port, served by sandboxd and the Python runtime.
const defaultRuntimePort = 8888

// defaultGRPCPort is sandboxd's gRPC ProcessService port.
const defaultGRPCPort = 9090

// Router request headers (the router's routing contract).
const (
	HeaderSandboxID        = "X-Sandbox-ID"
	HeaderSandboxNamespace = "X-Sandbox-Namespace"
	HeaderSandboxPort      = "X-Sandbox-Port"
)

const (
	maxAttempts     = 5
	firstBackoff    = 100 * time.Millisecond
	maxBackoff      = 2 * time.Second
	maxErrorBody    = 512
	maxJSONResponse = 16 << 20
)

// Endpoint says where a sandbox runtime answers.
type Endpoint struct {
	// URL is the base URL: the runtime itself (http://<pod IP>:8888) or the sandbox-router.
	URL string
	// Sandbox and Namespace, when Sandbox is set, are sent as X-Sandbox-ID and
	// X-Sandbox-Namespace so the router can route; Port (default 8888) as X-Sandbox-Port.
	Sandbox, Namespace string
	Port               int
	// GRPCAddr, when set, is sandboxd's gRPC address (host:port, port 9090 by default); only
	// Stream uses it.
	GRPCAddr string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// HTTPClient carries the requests; nil means one that ignores proxy environment variables.
	HTTPClient *http.Client
}

// Runtime runs commands and moves files in one sandbox over the legacy runtime HTTP API
// (POST /execute, POST /upload, GET /download/, /list/, /exists/).
type Runtime struct {
	base     *url.URL
	grpcAddr string
	headers  http.Header
	http     *http.Client
	sleep    func(context.Context, time.Duration) error
}

// NewRuntime checks e and returns a Runtime for it.
func NewRuntime(e Endpoint) (*Runtime, error) {
	return newRuntime(e, defaultRuntimePort)
}

// newRuntime is NewRuntime for an API whose port on the pod is defaultPort unless e.Port says.
func newRuntime(e Endpoint, defaultPort int) (*Runtime, error) {
	base, err := url.Parse(e.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("Endpoint.URL=%q: want an absolute http:// or https:// URL such as http://198.18.0.5:%d", e.URL, defaultPort)
	}
	h := http.Header{}
	if e.Sandbox != "" {
		port := e.Port
		if port == 0 {
			port = defaultPort
		}
		ns := e.Namespace
		if ns == "" {
			ns = "default"
		}
		h.Set(HeaderSandboxID, e.Sandbox)
		h.Set(HeaderSandboxNamespace, ns)
		h.Set(HeaderSandboxPort, strconv.Itoa(port))
	}
	if e.Token != "" {
		h.Set("Authorization", "Bearer "+e.Token)
	}
	hc := e.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // sandbox traffic stays on the cluster network
		hc = &http.Client{Transport: tr}
	}
	return &Runtime{base: base, grpcAddr: e.GRPCAddr, headers: h, http: hc, sleep: sleepCtx}, nil
}

// Result is a finished command.
type Result struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// Run runs command in the sandbox and returns its collected output and exit code. The runtime
// splits command like a POSIX shell but runs no shell: use "sh -c '...'" for pipes and
// redirections. A command that may have started is never retried.
func (r *Runtime) Run(ctx context.Context, command string) (*Result, error) {
	body, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		return nil, err
	}
	res := &Result{ExitCode: -1}
	err = r.do(ctx, "run", false, http.MethodPost, "execute", "application/json", body, func(resp *http.Response) error {
		return json.NewDecoder(io.LimitReader(resp.Body, maxJSONResponse)).Decode(res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// WriteFile writes data to path (relative to the sandbox root; parent directories are created).
func (r *Runtime) WriteFile(ctx context.Context, path string, data []byte) error {
	if err := checkPath(path); err != nil {
		return err
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part, err := mw.CreateFormFile("file", path)
	if err != nil {
		return err
	}
	if _, err := part.Write(data); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	// A whole-file upload is idempotent, so it is retried like a read.
	return r.do(ctx, "write "+path, true, http.MethodPost, "upload", mw.FormDataContentType(), buf.Bytes(), nil)
}

// ReadFile returns the contents of the file at path.
func (r *Runtime) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	var data []byte
	err := r.do(ctx, "read "+path, true, http.MethodGet, "download/"+escapePath(path), "", nil, func(resp *http.Response) (err error) {
		data, err = io.ReadAll(resp.Body)
		return err
	})
	return data, err
}

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name    string
	Size    int64
	IsDir   bool
	ModTime time.Time
}

// ListFiles lists the directory at dir ("." for the sandbox root).
func (r *Runtime) ListFiles(ctx context.Context, dir string) ([]FileEntry, error) {
	if err := checkPath(dir); err != nil {
		return nil, err
	}
	var wire []struct {
		Name    string  `json:"name"`
		Size    int64   `json:"size"`
		Type    string  `json:"type"`
		ModTime float64 `json:"mod_time"`
	}
	err := r.do(ctx, "list "+dir, true, http.MethodGet, "list/"+escapePath(dir), "", nil, func(resp *http.Response) error {
		return json.NewDecoder(io.LimitReader(resp.Body, maxJSONResponse)).Decode(&wire)
	})
	if err != nil {
		return nil, err
	}
	out := make([]FileEntry, 0, len(wire))
	for _, e := range wire {
		sec := int64(e.ModTime)
		out = append(out, FileEntry{Name: e.Name, Size: e.Size, IsDir: e.Type == "directory",
			ModTime: time.Unix(sec, int64((e.ModTime-float64(sec))*1e9)).UTC()})
	}
	return out, nil
}

// Exists reports whether path exists in the sandbox.
func (r *Runtime) Exists(ctx context.Context, path string) (bool, error) {
	if err := checkPath(path); err != nil {
		return false, err
	}
	var wire struct {
		Exists bool `json:"exists"`
	}
	err := r.do(ctx, "exists "+path, true, http.MethodGet, "exists/"+escapePath(path), "", nil, func(resp *http.Response) error {
		return json.NewDecoder(io.LimitReader(resp.Body, maxJSONResponse)).Decode(&wire)
	})
	return wire.Exists, err
}

func checkPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %q: want a non-empty path without NUL bytes, relative to the sandbox root", p)
	}
	return nil
}

// escapePath percent-encodes each segment of p and keeps the slashes, so proxies see an
// ordinary path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// do sends one request with an in-memory body, retrying when retryable says so, and hands a
// 2xx response to read.
func (r *Runtime) do(ctx context.Context, op string, idempotent bool, method, endpoint, contentType string, body []byte, read func(*http.Response) error) error {
	return r.send(ctx, op, idempotent, method, endpoint, contentType, bytes.NewReader(body), read)
}

// send is do for any body: nil, or a reader that is rewound before each retry when it is an
// io.Seeker and otherwise sent once, since its bytes are gone after the first attempt.
func (r *Runtime) send(ctx context.Context, op string, idempotent bool, method, endpoint, contentType string, body io.Reader, read func(*http.Response) error) error {
	// Concatenated rather than url.JoinPath, which would re-escape the already escaped segments.
	target := strings.TrimSuffix(r.base.String(), "/") + "/" + endpoint
	seeker, rewindable := body.(io.Seeker)
	if body == nil {
		rewindable = true
	}
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			if err := r.sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("sandbox runtime: %s: gave up after %d attempts: %w", op, attempt, errors.Join(lastErr, err))
			}
			if seeker != nil {
				if _, err := seeker.Seek(0, io.SeekStart); err != nil {
					return fmt.Errorf("sandbox runtime: %s: rewinding the body for a retry: %w", op, errors.Join(lastErr, err))
				}
			}
		}
		status, err := r.once(ctx, op, method, target, contentType, body, read)
		if err == nil {
			return nil
		}
		lastErr = err
		if ctx.Err() != nil || !rewindable || !retryable(idempotent, status, err) {
			return err
		}
	}
	return fmt.Errorf("sandbox runtime: %s: gave up after %d attempts: %w", op, maxAttempts, lastErr)
}

// once sends one attempt; status is 0 when no response arrived.
func (r *Runtime) once(ctx context.Context, op, method, target, contentType string, body io.Reader, read func(*http.Response) error) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return 0, fmt.Errorf("sandbox runtime: %s: %w", op, err)
	}
	for k, v := range r.headers {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("sandbox runtime: %s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, newHTTPError(op, resp)
	}
	if read == nil {
		return resp.StatusCode, nil
	}
	if err := read(resp); err != nil {
		return resp.StatusCode, fmt.Errorf("sandbox runtime: %s: reading the response: %w", op, err)
	}
	return resp.StatusCode, nil
}

// retryable says whether an attempt that failed with status (0: no response) and err may be
// sent again. A refused connection never reached the runtime, so any request may be retried;
// other failures only for idempotent requests, and only when the server may recover.
func retryable(idempotent bool, status int, err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if !idempotent {
		return false
	}
	switch status {
	case 0:
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the pause before attempt (1-based retries): 100ms doubling, at most 2s.
func backoff(attempt int) time.Duration {
	d := firstBackoff << (attempt - 1)
	if d > maxBackoff || d <= 0 {
		return maxBackoff
	}
	return d
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
