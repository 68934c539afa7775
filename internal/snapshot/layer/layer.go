package layer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// OCI whiteout names (image-spec layer.md): ".wh.<name>" deletes name from the layers below,
// ".wh..wh..opq" in a directory hides everything the layers below have in it.
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// Limits bound what one capture may produce.
type Limits struct {
	// MaxBytes caps the sum of the regular files' apparent sizes.
	MaxBytes int64
	// MaxEntries caps the number of tar entries.
	MaxEntries int
	// MaxDepth caps directory nesting.
	MaxDepth int
}

// DefaultLimits are generous for a sandbox's writes and still protect a node's disk.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 10 << 30, MaxEntries: 1 << 20, MaxDepth: 256}
}

// Options configure a capture.
type Options struct {
	Limits
	// Exclude lists slash-separated paths, relative to the root (for example "run/secrets"),
	// left out with everything under them.
	Exclude []string
}

// Stats describe a written layer.
type Stats struct {
	Entries      int
	ContentBytes int64
	Whiteouts    int
	// Skipped lists what was left out: sockets and excluded paths.
	Skipped []string
}

// writer emits entries to the layer, enforcing the limits, and remembers regular files for hard
// links.
type writer struct {
	tw    *tar.Writer
	opts  Options
	stats Stats
	// prefix is prepended to every entry's name and hard link target (a volume's reserved
	// path); empty for a root filesystem layer.
	prefix string
	// files maps a source's identity of a regular file to the layer path it was written at.
	files map[any]string
}

func newWriter(w io.Writer, o Options) *writer {
	return &writer{tw: tar.NewWriter(w), opts: o, files: map[any]string{}}
}

func (w *writer) close() error { return w.tw.Close() }

// header writes h after counting it against MaxEntries.
func (w *writer) header(h *tar.Header) error {
	w.stats.Entries++
	if w.stats.Entries > w.opts.MaxEntries {
		return fmt.Errorf("more than %d entries; the layer limit is reached", w.opts.MaxEntries)
	}
	h.Format = tar.FormatPAX
	if w.prefix != "" {
		dir := strings.HasSuffix(h.Name, "/")
		h.Name = path.Join(w.prefix, h.Name)
		if dir {
			h.Name += "/"
		}
		if h.Typeflag == tar.TypeLink {
			h.Linkname = path.Join(w.prefix, h.Linkname)
		}
	}
	return w.tw.WriteHeader(h)
}

// charge counts n content bytes of p against MaxBytes before anything is read.
func (w *writer) charge(p string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%s: negative size %d", p, n)
	}
	if w.stats.ContentBytes+n > w.opts.MaxBytes {
		return fmt.Errorf("%s: its %d bytes would take the layer past its limit of %d bytes", p, n, w.opts.MaxBytes)
	}
	w.stats.ContentBytes += n
	return nil
}

func (w *writer) whiteout(dir, name string, h *tar.Header) error {
	w.stats.Whiteouts++
	return w.header(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(dir, whiteoutPrefix+name), Mode: 0o600, ModTime: h.ModTime})
}

func (w *writer) opaque(dir string, h *tar.Header) error {
	w.stats.Whiteouts++
	return w.header(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(dir, opaqueWhiteout), Mode: 0o600, ModTime: h.ModTime})
}

// excluded reports whether p is an excluded path or under one.
func (w *writer) excluded(p string) bool {
	for _, x := range w.opts.Exclude {
		x = strings.Trim(x, "/")
		if p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

func (w *writer) skip(p, why string) {
	w.stats.Skipped = append(w.stats.Skipped, p+" ("+why+")")
}

// validName refuses a path component that could leave the layer's root or that the OCI format
// would read as a deletion.
func validName(dir, name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%q in %q: not a file name", name, "/"+dir)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%q in %q: a name holds '/' or NUL", name, "/"+dir)
	case strings.HasPrefix(name, whiteoutPrefix):
		return fmt.Errorf("/%s: names starting with %q mean deletions in an OCI layer and cannot be stored; rename the file", path.Join(dir, name), whiteoutPrefix)
	}
	return nil
}

// errChanged is a file that changed while it was copied.
var errChanged = errors.New("changed while it was captured (was the container paused?)")
