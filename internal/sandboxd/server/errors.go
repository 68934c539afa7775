package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/sandboxd/files"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// Error codes of the REST API's {"code","message"} body.
const (
	codeInvalidArgument   = "INVALID_ARGUMENT"
	codePermissionDenied  = "PERMISSION_DENIED"
	codeNotFound          = "NOT_FOUND"
	codeConflict          = "CONFLICT"
	codeInternal          = "INTERNAL"
	codeUnavailable       = "UNAVAILABLE"
	codeUnauthenticated   = "UNAUTHENTICATED"
	codeResourceExhausted = "RESOURCE_EXHAUSTED"
)

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	httpjson.Write(w, status, apiError{Code: code, Message: message})
}

// fileError maps a file operation's error to the REST status, code and message.
func fileError(err error) (int, string, string) {
	var tooBig *http.MaxBytesError
	switch {
	case pathsafe.IsEscape(err):
		return http.StatusForbidden, codePermissionDenied, pathsafe.ErrEscapes.Error()
	case errors.Is(err, pathsafe.ErrInvalid), errors.Is(err, pathsafe.ErrTooLong):
		return http.StatusBadRequest, codeInvalidArgument, err.Error()
	case errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusBadRequest, codeInvalidArgument, fmt.Sprintf("path is too long for the file system (names of at most %d bytes, paths of at most %d): %v", pathsafe.MaxComponentLength, pathsafe.MaxPathLength, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, codeUnavailable, "the request ended before the path was resolved: " + err.Error()
	case errors.Is(err, files.ErrIsDirectory), errors.Is(err, errNotRegular):
		return http.StatusBadRequest, codeInvalidArgument, err.Error()
	case errors.Is(err, files.ErrNotEmpty), errors.Is(err, files.ErrRootDelete):
		return http.StatusConflict, codeConflict, err.Error()
	case errors.Is(err, syscall.EEXIST):
		return http.StatusConflict, codeConflict, "a file that is not a directory is in the way: " + err.Error()
	case errors.Is(err, files.ErrTooLarge), errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, codeResourceExhausted, err.Error() + "; raise --max-upload-bytes or send less"
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return http.StatusNotFound, codeNotFound, "path does not exist within the sandbox"
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, codePermissionDenied, err.Error()
	case errors.Is(err, syscall.ELOOP):
		return http.StatusBadRequest, codeInvalidArgument, "too many levels of symbolic links in the path"
	default:
		return http.StatusInternalServerError, codeInternal, err.Error()
	}
}

func writeFileError(w http.ResponseWriter, err error) {
	status, code, msg := fileError(err)
	writeError(w, status, code, msg)
}
