package sdk

import (
	"errors"
	"fmt"
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
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("sandbox runtime: %s: HTTP %d: %s", e.Op, e.StatusCode, e.Body)
}
