package envd

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// paths maps the paths E2B clients send to the sandbox root and back. A client sees the root as
// its home directory (/home/user): relative paths start there, and "/home/user/x" is "x" under
// the root. Any other absolute path goes through the root's confinement as with sandboxd's other
// APIs (re-rooted inside it; symlinks never lead out).
type paths struct {
	root *pathsafe.Root
	home string
}

// rootRelative is the path inside the root that userPath names, before symlinks are resolved.
func (p paths) rootRelative(userPath string) (string, error) {
	if strings.ContainsRune(userPath, 0) {
		return "", pathsafe.ErrInvalid
	}
	if !path.IsAbs(userPath) {
		userPath = path.Join(p.home, userPath)
	}
	clean := path.Clean(userPath)
	if clean == p.home {
		return ".", nil
	}
	if rest, ok := strings.CutPrefix(clean, p.home+"/"); ok {
		return rest, nil
	}
	return clean, nil
}

// resolve confines userPath to the root, following every symlink.
func (p paths) resolve(userPath string) (string, error) {
	rel, err := p.rootRelative(userPath)
	if err != nil {
		return "", err
	}
	return p.root.Resolve(rel)
}

// resolveNoFollow confines userPath to the root, keeping a final symlink (for remove and move).
func (p paths) resolveNoFollow(userPath string) (string, error) {
	rel, err := p.rootRelative(userPath)
	if err != nil {
		return "", err
	}
	return p.root.ResolveNoFollow(rel)
}

// display is the path clients see for rel (a resolved path inside the root).
func (p paths) display(rel string) string {
	if rel == "." || rel == "" {
		return p.home
	}
	return p.home + "/" + rel
}

// pathError turns a confinement failure into the Connect error the SDK maps.
func pathError(field, userPath string, err error) *connect.Error {
	switch {
	case errors.Is(err, pathsafe.ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %q: %w", field, userPath, err))
	case pathsafe.IsEscape(err):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %q: %w", field, userPath, err))
	default:
		return fsError(field, userPath, err)
	}
}
