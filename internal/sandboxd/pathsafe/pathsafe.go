// Package pathsafe confines the paths that clients send to the sandbox root. Lexical does the
// string work; Root resolves symlinks one component at a time inside an os.Root, so neither
// "..", an absolute path nor a symlink can reach a file outside the root, and every file
// operation that follows goes through the same os.Root as a second line of defence.
package pathsafe

import (
	"errors"
	"path/filepath"
	"strings"
)

// ErrEscapes is returned for a path that would leave the sandbox root.
var ErrEscapes = errors.New("path traversal outside sandbox root is forbidden")

// ErrInvalid is returned for a path that no file system accepts (a NUL byte).
var ErrInvalid = errors.New("path contains a NUL byte; remove it")

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
