// Package image builds OCI images without a container engine and pushes them to a registry.
//
// Images are scratch-based and linux/amd64: a static Go binary (FromBinary) or a file tree
// (FromTree) as the only layer, the ko-style way Paddock builds its pause, shell, controller,
// router and sandbox images for the local cluster; or any layers stacked (FromLayers), such as a
// root filesystem compressed once into a cache (CompressTar, CompressedFileLayer) under a small
// layer that changes often.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Tree is the content of an image's single layer: regular files copied from the host or given
// inline, directories and symlinks, keyed by their absolute path inside the image.
type Tree struct {
	entries map[string]entry
}

type entry struct {
	source   string // host file to copy
	data     []byte // inline content, when source is empty
	mode     int64
	link     string // symlink target; empty for a regular file
	dir      bool
	uid, gid int
}

// NewTree returns an empty layer tree.
func NewTree() *Tree { return &Tree{entries: map[string]entry{}} }

// AddFile copies the host file source to dst (an absolute path in the image) with mode.
func (t *Tree) AddFile(dst, source string, mode int64) *Tree {
	t.entries[clean(dst)] = entry{source: source, mode: mode}
	return t
}

// AddData writes data to dst (an absolute path in the image) with mode.
func (t *Tree) AddData(dst string, data []byte, mode int64) *Tree {
	t.entries[clean(dst)] = entry{data: data, mode: mode}
	return t
}

// AddDir makes dst (an absolute path in the image) a directory with mode, owned by uid:gid.
func (t *Tree) AddDir(dst string, mode int64, uid, gid int) *Tree {
	t.entries[clean(dst)] = entry{dir: true, mode: mode, uid: uid, gid: gid}
	return t
}

// AddSymlink makes dst (an absolute path in the image) a symlink to target.
func (t *Tree) AddSymlink(dst, target string) *Tree {
	t.entries[clean(dst)] = entry{link: target, mode: 0o777}
	return t
}

// Paths lists the tree's paths in sorted order.
func (t *Tree) Paths() []string {
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// Config is the runtime configuration of an image.
type Config struct {
	// Entrypoint is the command the container runs, for example ["/pause"].
	Entrypoint []string
	// Cmd is the default arguments, or the command when Entrypoint is empty.
	Cmd []string
	// Env holds KEY=VALUE pairs.
	Env []string
	// User is the user the container runs as, for example "65532:65532"; empty means root.
	User string
	// WorkingDir is the command's directory; empty means /.
	WorkingDir string
	// Labels describe the image (what it holds, where it came from).
	Labels map[string]string
}

// FromBinary builds an image whose only file is the static binary at binaryPath, installed at
// entrypoint (an absolute path) and run as the entrypoint.
func FromBinary(binaryPath, entrypoint string) (v1.Image, error) {
	return FromTree(NewTree().AddFile(entrypoint, binaryPath, 0o755), Config{Entrypoint: []string{entrypoint}})
}

// FromTree builds a scratch-based linux/amd64 image with tree as its single layer.
func FromTree(tree *Tree, cfg Config) (v1.Image, error) {
	layer, err := tree.Layer()
	if err != nil {
		return nil, err
	}
	return FromLayers(cfg, layer)
}

// Layer is the tree as an image layer.
func (t *Tree) Layer() (v1.Layer, error) {
	data, err := t.tar()
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("make image layer: %w", err)
	}
	return layer, nil
}

// FromLayers builds a scratch-based linux/amd64 image of layers, the first at the bottom.
func FromLayers(cfg Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("append image layers: %w", err)
	}
	file, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	file = file.DeepCopy()
	// containerd refuses images without a platform, so it is always set.
	file.OS, file.Architecture = "linux", "amd64"
	file.Config.Entrypoint = cfg.Entrypoint
	file.Config.Cmd = cfg.Cmd
	file.Config.Env = cfg.Env
	file.Config.User = cfg.User
	file.Config.WorkingDir = cfg.WorkingDir
	file.Config.Labels = cfg.Labels
	return mutate.ConfigFile(img, file)
}

// tar writes the tree as an uncompressed tar with fixed timestamps and owners, so that the same
// inputs give the same layer digest and a second push is a no-op.
func (t *Tree) tar() ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range t.Paths() {
		if err := writeParents(w, dirs, p); err != nil {
			return nil, err
		}
		if err := t.writeEntry(w, p, t.entries[p]); err != nil {
			return nil, err
		}
		if t.entries[p].dir {
			dirs[p] = true
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var epoch = time.Unix(0, 0)

func writeParents(w *tar.Writer, written map[string]bool, p string) error {
	dir := path.Dir(p)
	if dir == "." || written[dir] {
		return nil
	}
	if err := writeParents(w, written, dir); err != nil {
		return err
	}
	written[dir] = true
	return w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch})
}

func (t *Tree) writeEntry(w *tar.Writer, p string, e entry) error {
	switch {
	case e.link != "":
		return w.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: e.link, Mode: e.mode, ModTime: epoch})
	case e.dir:
		return w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch})
	}
	data := e.data
	if e.source != "" {
		var err error
		if data, err = os.ReadFile(e.source); err != nil {
			return fmt.Errorf("read %s for image path /%s: %w", e.source, p, err)
		}
	}
	if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(data)), Mode: e.mode, ModTime: epoch}); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// Pushed is the outcome of Push.
type Pushed struct {
	// Ref is the pushed image pinned by digest (HOST:PORT/NAME@sha256:...): use it in pod specs
	// so that a node never runs a stale image cached under the same tag.
	Ref string
	// Uploaded is false when the registry already held the same manifest under the tag.
	Uploaded bool
}

// Push uploads img as ref (for example "127.0.0.1:5001/pause:dev"). Registries on localhost or
// 127.0.0.1 are reached over plain HTTP. Nothing is uploaded when the registry already holds the
// same manifest under that tag.
func Push(ctx context.Context, img v1.Image, ref string) (Pushed, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Pushed{}, fmt.Errorf("image reference %q: %w; want HOST:PORT/NAME:TAG", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Pushed{}, err
	}
	pinned := tag.Context().Digest(digest.String()).String()
	if desc, err := remote.Head(tag, remote.WithContext(ctx)); err == nil && desc.Digest == digest {
		return Pushed{Ref: pinned}, nil
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return Pushed{Ref: pinned, Uploaded: true}, nil
}
