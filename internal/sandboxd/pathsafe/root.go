package pathsafe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink expansion like the kernel's MAXSYMLINKS, so a loop ends in ELOOP.
const maxSymlinks = 40

// Root is the sandbox root directory, opened once.
type Root struct {
	dir string // absolute, clean, symlinks evaluated
	fs  *os.Root
}

// Open creates dir (0755) when missing and opens it as the sandbox root.
func Open(dir string) (*Root, error) {
	if dir == "" {
		return nil, errors.New("sandbox root directory is empty; pass an absolute directory such as /workspace")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("creating sandbox root: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("resolving sandbox root %q: %w", abs, err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("opening sandbox root: %w", err)
	}
	return &Root{dir: real, fs: r}, nil
}

// Dir is the absolute path of the root directory.
func (r *Root) Dir() string { return r.dir }

// FS is the os.Root that every file operation must go through.
func (r *Root) FS() *os.Root { return r.fs }

// Close releases the root directory.
func (r *Root) Close() error { return r.fs.Close() }

// Abs turns a path returned by Resolve into an absolute path, for APIs (a child's working
// directory) that cannot take an os.Root.
func (r *Root) Abs(rel string) string { return filepath.Join(r.dir, rel) }

// Resolve confines userPath to the root and follows every symlink in it, including the last
// component. The result is relative to the root and contains no symlink; components that do not
// exist yet are kept as written, so the result also names files about to be created.
func (r *Root) Resolve(userPath string) (string, error) {
	return r.resolve(userPath, true)
}

// ResolveNoFollow is Resolve without following a symlink in the last component, for operations
// on the link itself (delete).
func (r *Root) ResolveNoFollow(userPath string) (string, error) {
	return r.resolve(userPath, false)
}

func (r *Root) resolve(userPath string, followFinal bool) (string, error) {
	rel, err := Lexical(r.dir, userPath)
	if err != nil {
		return "", err
	}
	pending := splitPath(rel)
	var done []string
	links, missing := 0, false
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		switch {
		case name == ".":
			continue
		case name == "..":
			if len(done) == 0 {
				return "", ErrEscapes
			}
			done = done[:len(done)-1]
			continue
		case missing || (!followFinal && len(pending) == 0):
			done = append(done, name)
			continue
		}
		candidate := strings.Join(append(done[:len(done):len(done)], name), "/")
		info, err := r.fs.Lstat(candidate)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return "", err
			}
			// Nothing below a missing component can be a symlink: keep the rest as written.
			missing = true
			done = append(done, name)
			continue
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			done = append(done, name)
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: userPath, Err: syscall.ELOOP}
		}
		target, err := r.fs.Readlink(candidate)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			inside, ok := Within(r.dir, target)
			if !ok {
				return "", ErrEscapes
			}
			done, target = nil, inside
		}
		pending = append(splitPath(target), pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(c rune) bool { return c == '/' })
}

// IsEscape reports whether err means a path left the root, either from Resolve or from the
// os.Root safety net (whose sentinel is unexported, hence the message match).
func IsEscape(err error) bool {
	if errors.Is(err, ErrEscapes) {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
