package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Sentinel errors. Every error the SDK returns for a failed claim wraps one of them in a
// *ClaimError, so callers branch with errors.Is and read details with errors.As.
var (
	// ErrPoolNotFound: the warm pool named in ClaimOptions does not exist.
	ErrPoolNotFound = errors.New("warm pool not found")
	// ErrNotReady: the claim did not become Ready before the context ended.
	ErrNotReady = errors.New("sandbox claim not ready")
	// ErrClaimFailed: the controller reported a reason that will not resolve by waiting
	// (template missing, metadata rejected, expired, ...).
	ErrClaimFailed = errors.New("sandbox claim failed")
	// ErrSandboxGone: the claim or its Sandbox was deleted while the SDK waited on it.
	ErrSandboxGone = errors.New("sandbox gone")
	// ErrSuspended: the claim's sandbox is suspended (no Pod), so its runtime cannot answer
	// until Resume.
	ErrSuspended = errors.New("sandbox suspended")
)

// Sentinel errors of runtime and file calls; an *HTTPError matches them with errors.Is.
var (
	// ErrFileNotFound: the path does not exist in the sandbox (HTTP 404).
	ErrFileNotFound = errors.New("no such file or directory in the sandbox")
	// ErrPermissionDenied: the runtime refused the path, for example because it escapes the
	// sandbox root, or the file's permissions forbid the access (HTTP 403).
	ErrPermissionDenied = errors.New("permission denied by the sandbox runtime")
)

// ClaimError says which claim failed, how, and the last Ready condition the controller wrote.
type ClaimError struct {
	// Kind is one of the sentinel errors above.
	Kind error
	// Object is "SandboxClaim" or "Sandbox" (empty when Detail names the object); Namespace and Name identify it (Name is empty when
	// the claim was never created).
	Object, Namespace, Name string
	// Reason and Message are the last Ready condition seen, empty when none was seen.
	Reason, Message string
	// Detail says what happened in words; Err is the underlying cause, if any.
	Detail string
	Err    error
}

func (e *ClaimError) Error() string {
	msg := e.Detail
	if e.Object != "" {
		msg = fmt.Sprintf("%s %s/%s: %s", e.Object, e.Namespace, e.Name, e.Detail)
	}
	if e.Reason != "" || e.Message != "" {
		msg += fmt.Sprintf(" (last Ready reason %q: %s)", e.Reason, e.Message)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap lets errors.Is match both the kind and the cause (for example context.DeadlineExceeded).
func (e *ClaimError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// HTTPError is a non-2xx answer from the sandbox runtime or the router.
type HTTPError struct {
	// Op is the SDK operation, e.g. "run" or "read /etc/hosts".
	Op         string
	StatusCode int
	// Body is the start of the response body (at most 512 bytes).
	Body string
	// Code and Message are sandboxd's REST error body {"code","message"}, when it sent one.
	Code, Message string
}

func newHTTPError(op string, resp *http.Response) *HTTPError {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &HTTPError{Op: op, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(msg))}
	var wire struct{ Code, Message string }
	if json.Unmarshal(msg, &wire) == nil && wire.Code != "" {
		e.Code, e.Message = wire.Code, wire.Message
	}
	if e.Body == "" {
		e.Body = http.StatusText(resp.StatusCode) // HEAD answers carry no body
	}
	return e
}

func (e *HTTPError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("sandbox runtime: %s: %s (HTTP %d): %s", e.Op, e.Code, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("sandbox runtime: %s: HTTP %d: %s", e.Op, e.StatusCode, e.Body)
}

// Is matches ErrFileNotFound for 404 and ErrPermissionDenied for 403.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrFileNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrPermissionDenied:
		return e.StatusCode == http.StatusForbidden
	}
	return false
}
