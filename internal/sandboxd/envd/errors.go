package envd

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// fsError maps a filesystem failure to the Connect code the SDK understands (NotFound makes
// exists() false, AlreadyExists makes makeDir() false).
func fsError(field, userPath string, err error) *connect.Error {
	if errors.Is(err, pathsafe.ErrTooLong) || errors.Is(err, syscall.ENAMETOOLONG) {
		return tooLong(field, userPath, err)
	}
	code := connect.CodeInternal
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		code = connect.CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission):
		code = connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code = connect.CodeResourceExhausted
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		code = connect.CodeFailedPrecondition
	}
	return connect.NewError(code, fmt.Errorf("%s %q: %w", field, userPath, err))
}

// shownPrefix is how many bytes of an overlong path an error message shows.
const shownPrefix = 64

// tooLong refuses a path over sandboxd's limits, naming the limit and showing only the path's
// start: the whole path may be megabytes, and os errors (ENAMETOOLONG) carry all of it.
func tooLong(field, userPath string, err error) *connect.Error {
	why := err.Error()
	if !errors.Is(err, pathsafe.ErrTooLong) {
		why = syscall.ENAMETOOLONG.Error()
	}
	shown := userPath
	if len(shown) > shownPrefix {
		shown = shown[:shownPrefix] + "…"
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %q: %s; send paths of at most %d bytes and %d levels, with names of at most %d bytes",
		field, shown, why, pathsafe.MaxPathLength, pathsafe.MaxDepth, pathsafe.MaxComponentLength))
}

// writeError answers envd's REST error body, E2B's Error schema.
func writeError(w http.ResponseWriter, status int, message string) {
	httpjson.Write(w, status, e2b.Error{Code: status, Message: message})
}

// httpStatus is the /files status for a Connect code.
func httpStatus(err *connect.Error) int {
	switch err.Code() {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}
