package pathsafe

import (
	"context"
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
	return r.resolve(context.Background(), userPath, true)
}

// ResolveContext is Resolve that stops with ctx's error when ctx ends first (the client left).
func (r *Root) ResolveContext(ctx context.Context, userPath string) (string, error) {
	return r.resolve(ctx, userPath, true)
}

// ResolveNoFollow is Resolve without following a symlink in the last component, for operations
// on the link itself (delete).
func (r *Root) ResolveNoFollow(userPath string) (string, error) {
	return r.resolve(context.Background(), userPath, false)
}

// ResolveNoFollowContext is ResolveNoFollow that stops when ctx ends.
func (r *Root) ResolveNoFollowContext(ctx context.Context, userPath string) (string, error) {
	return r.resolve(ctx, userPath, false)
}

// resolve walks the path once: dirs[i] is the directory done[:i] opened, so every step looks up
// one name in an open directory instead of walking the whole prefix again (which made deep paths
// cost time quadratic in their depth).
func (r *Root) resolve(ctx context.Context, userPath string, followFinal bool) (string, error) {
	rel, err := Lexical(r.dir, userPath)
	if err != nil {
		return "", err
	}
	pending := splitPath(rel)
	var done []string
	dirs := []*os.Root{r.fs}
	defer func() {
		for _, d := range dirs[1:] {
			d.Close()
		}
	}()
	// trim closes the opened directories deeper than done.
	trim := func() {
		for len(dirs) > len(done)+1 {
			dirs[len(dirs)-1].Close()
			dirs = dirs[:len(dirs)-1]
		}
	}
	links, missing := 0, false
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return "", err
		}
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
			trim()
			continue
		case len(done) >= MaxDepth:
			return "", fmt.Errorf("%w: more than %d levels deep once symlinks are followed", ErrTooLong, MaxDepth)
		case len(name) > MaxComponentLength:
			return "", fmt.Errorf("%w: a name of %d bytes, more than %d", ErrTooLong, len(name), MaxComponentLength)
		case missing || (!followFinal && len(pending) == 0):
			done = append(done, name)
			continue
		}
		dir := dirs[len(dirs)-1]
		info, err := dir.Lstat(name)
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
			if len(pending) == 0 {
				continue
			}
			if !info.IsDir() {
				missing = true // a file with more below it: the operation will fail with ENOTDIR
				continue
			}
			sub, err := dir.OpenRoot(name)
			if err != nil {
				return "", err
			}
			dirs = append(dirs, sub)
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: userPath, Err: syscall.ELOOP}
		}
		target, err := dir.Readlink(name)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			inside, ok := Within(r.dir, target)
			if !ok {
				return "", ErrEscapes
			}
			done, target = nil, inside
			trim()
		}
		pending = append(splitPath(target), pending...)
		if len(pending) > MaxDepth*(maxSymlinks+1) {
			return "", fmt.Errorf("%w: symlinks expand it beyond %d components", ErrTooLong, MaxDepth*(maxSymlinks+1))
		}
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
