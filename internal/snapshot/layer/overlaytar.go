package layer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// gVisor's tar of the rootfs upper layer marks opaque directories with this PAX record.
const paxOpaque = "SCHILY.xattr.trusted.overlay.opaque"

// FromOverlayTar converts a tar of an overlay upper layer in overlayfs's conventions (whiteouts
// as character devices 0:0, opaque directories by xattr), as `runsc tar rootfs-upper` writes it,
// into an OCI layer. Every name is checked as FromUpperDir checks them, hard links must name a
// file earlier in the same tar, and only the fields a layer needs are copied.
func FromOverlayTar(in io.Reader, out io.Writer, o Options) (Stats, error) {
	tr := tar.NewReader(in)
	w := newWriter(out, o)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return w.stats, w.close()
		}
		if err != nil {
			return w.stats, fmt.Errorf("reading the upper layer tar: %w", err)
		}
		if err := convertEntry(w, tr, h); err != nil {
			return w.stats, err
		}
	}
}

func convertEntry(w *writer, tr *tar.Reader, in *tar.Header) error {
	p, err := cleanPath(in.Name)
	if err != nil || p == "" {
		return err // the root itself carries nothing a layer keeps
	}
	if strings.Count(p, "/") >= w.opts.MaxDepth {
		return fmt.Errorf("/%s: deeper than %d directories", p, w.opts.MaxDepth)
	}
	if w.excluded(p) {
		w.skip(p, "excluded")
		return nil
	}
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	h := &tar.Header{Name: p, Mode: in.Mode & 0o7777, Uid: in.Uid, Gid: in.Gid, ModTime: in.ModTime.UTC()}
	switch in.Typeflag {
	case tar.TypeDir:
		h.Typeflag, h.Name = tar.TypeDir, p+"/"
		if err := w.header(h); err != nil {
			return err
		}
		if in.PAXRecords[paxOpaque] == "y" {
			return w.opaque(p, h)
		}
		return nil
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old tars write TypeRegA
		if err := w.charge("/"+p, in.Size); err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, in.Size
		if err := w.header(h); err != nil {
			return err
		}
		if _, err := io.CopyN(w.tw, tr, in.Size); err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		w.files[p] = p
		return nil
	case tar.TypeSymlink:
		if len(in.Linkname) >= 4096 {
			return fmt.Errorf("/%s: link target longer than 4096 bytes", p)
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, in.Linkname
		return w.header(h)
	case tar.TypeLink:
		target, err := cleanPath(in.Linkname)
		if err != nil {
			return fmt.Errorf("/%s: hard link: %w", p, err)
		}
		if _, ok := w.files[whiteoutAt(target)]; ok {
			// runsc's tar writes every whiteout after the first as a hard link to it (they share
			// one inode, seen after files renamed over in a directory of the image).
			return w.whiteout(dir, name, h)
		}
		if _, ok := w.files[target]; !ok {
			return fmt.Errorf("/%s: hard link to %q, which is not a file earlier in this layer", p, in.Linkname)
		}
		h.Typeflag, h.Linkname = tar.TypeLink, target
		return w.header(h)
	case tar.TypeChar:
		if in.Devmajor == 0 && in.Devminor == 0 {
			w.files[whiteoutAt(p)] = p
			return w.whiteout(dir, name, h)
		}
		return fmt.Errorf("/%s: a device node (%d:%d) cannot be stored in a snapshot; remove it", p, in.Devmajor, in.Devminor)
	case tar.TypeBlock:
		return fmt.Errorf("/%s: a block device cannot be stored in a snapshot; remove it", p)
	case tar.TypeFifo:
		h.Typeflag = tar.TypeFifo
		return w.header(h)
	}
	return fmt.Errorf("/%s: tar entry type %q is not a file, directory, link, FIFO or whiteout", p, in.Typeflag)
}

// whiteoutAt keys, in writer.files, a whiteout read at a path, so that a hard link to it is known
// as one more whiteout.
type whiteoutAt string

// cleanPath turns a tar name into a relative path whose every component validName accepts;
// leading "/" and "./" are dropped, the root is "".
func cleanPath(name string) (string, error) {
	name = strings.TrimLeft(strings.TrimPrefix(name, "./"), "/")
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." {
		return "", nil
	}
	parts := strings.Split(name, "/")
	for i, part := range parts {
		if err := validName(strings.Join(parts[:i], "/"), part); err != nil {
			return "", err
		}
	}
	return name, nil
}
