// Package pathsafe confines the paths that clients send to the sandbox root. Lexical does the
// string work; Root resolves symlinks one component at a time inside an os.Root, so neither
// "..", an absolute path nor a symlink can reach a file outside the root, and every file
// operation that follows goes through the same os.Root as a second line of defence.
package pathsafe

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrEscapes is returned for a path that would leave the sandbox root.
var ErrEscapes = errors.New("path traversal outside sandbox root is forbidden")

// ErrInvalid is returned for a path that no file system accepts (a NUL byte).
var ErrInvalid = errors.New("path contains a NUL byte; remove it")

// Limits on the paths clients send, checked before any file system work and again while symlinks
// expand: Linux's PATH_MAX and NAME_MAX, and a depth far beyond any real tree that bounds the
// work one request can cause.
const (
	MaxPathLength      = 4096
	MaxComponentLength = 255
	MaxDepth           = 256
)

// ErrTooLong is returned (wrapped, with the limit named) for a path over one of the limits.
var ErrTooLong = errors.New("path is too long")

// checkLimits checks a cleaned relative path against the limits.
func checkLimits(p string) error {
	if len(p) > MaxPathLength {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrTooLong, len(p), MaxPathLength)
	}
	depth := 0
	for part := range strings.SplitSeq(p, "/") {
		if len(part) > MaxComponentLength {
			return fmt.Errorf("%w: a name of %d bytes, more than %d", ErrTooLong, len(part), MaxComponentLength)
		}
		if depth++; depth > MaxDepth {
			return fmt.Errorf("%w: more than %d levels deep", ErrTooLong, MaxDepth)
		}
	}
	return nil
}

// Lexical returns userPath relative to rootDir, cleaned, without touching the file system.
// Absolute paths are re-rooted ("/f" means "<root>/f") unless they already name a place under
// rootDir, which is stripped; ".." that climbs above the root gives ErrEscapes. rootDir must be
// absolute and clean. The result is "." for the root itself and never starts with "/" or "..".
func Lexical(rootDir, userPath string) (string, error) {
	if strings.ContainsRune(userPath, 0) {
		return "", ErrInvalid
	}
	p := filepath.Clean(userPath)
	switch {
	case p == rootDir:
		return ".", nil
	case rootDir != "/" && strings.HasPrefix(p, rootDir+"/"):
		p = p[len(rootDir)+1:]
	case filepath.IsAbs(p):
		// Clean already folded "/.." into "/", so re-rooting cannot climb.
		p = strings.TrimLeft(p, "/")
		if p == "" {
			p = "."
		}
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", ErrEscapes
	}
	if err := checkLimits(p); err != nil {
		return "", err
	}
	return p, nil
}

// Within reports the part of abs below rootDir, when abs is rootDir or under it. The check is
// separator-aware: "/workspace-evil" is not within "/workspace".
func Within(rootDir, abs string) (string, bool) {
	abs = filepath.Clean(abs)
	if abs == rootDir {
		return ".", true
	}
	prefix := rootDir + "/"
	if rootDir == "/" {
		prefix = "/"
	}
	if rest, ok := strings.CutPrefix(abs, prefix); ok {
		return rest, true
	}
	return "", false
}
