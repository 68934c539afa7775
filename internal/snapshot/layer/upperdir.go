package layer

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/snapshot/fsat"
)

// Overlay extended attributes of an upper directory. Opaque directories become OCI opaque
// whiteouts; a redirect or metacopy means the data lives in a lower layer under another name,
// which one layer cannot express, so such a tree is refused.
var (
	opaqueXattrs     = []string{"trusted.overlay.opaque", "user.overlay.opaque"}
	unsupportedXattr = []string{"trusted.overlay.redirect", "trusted.overlay.metacopy", "user.overlay.redirect", "user.overlay.metacopy"}
)

// inode identifies a file on the host.
type inode struct{ dev, ino uint64 }

// FromUpperDir writes the overlayfs upper directory dir as an OCI layer to out. dir itself must
// be a directory, not a link to one.
func FromUpperDir(dir string, out io.Writer, o Options) (Stats, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, fmt.Errorf("opening upper directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	w := newWriter(out, o)
	u := &upper{writer: w}
	if err := u.walk(fd, "", 0); err != nil {
		return w.stats, err
	}
	return w.stats, w.close()
}

// upper walks an upper directory through descriptors only.
type upper struct {
	*writer
	// plain reads an ordinary directory (a volume), not an overlay upper directory: no entry
	// means a deletion, so a character device 0:0 is refused like any device and overlay
	// attributes, which the sandbox's code may set on its own files, mean nothing.
	plain bool
	// beforeOpen, when set, runs between listing an entry and opening it (tests race it).
	beforeOpen func(rel string)
}

func (u *upper) walk(dirfd int, rel string, depth int) error {
	if depth > u.opts.MaxDepth {
		return fmt.Errorf("/%s: deeper than %d directories", rel, u.opts.MaxDepth)
	}
	names, err := fsat.ReadNames(dirfd)
	if err != nil {
		return fmt.Errorf("listing /%s: %w", rel, err)
	}
	for _, name := range names {
		if err := validName(rel, name); err != nil {
			return err
		}
		p := path.Join(rel, name)
		if u.excluded(p) {
			u.skip(p, "excluded")
			continue
		}
		if err := u.entry(dirfd, rel, name, depth); err != nil {
			return err
		}
	}
	return nil
}

func (u *upper) entry(dirfd int, rel, name string, depth int) error {
	p := path.Join(rel, name)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	h := headerOf(p, &st)
	if u.beforeOpen != nil {
		u.beforeOpen(p)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return u.dir(dirfd, name, p, &st, h, depth)
	case unix.S_IFREG:
		return u.file(dirfd, name, p, &st, h)
	case unix.S_IFLNK:
		target, err := fsat.Readlink(dirfd, name)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
		return u.header(h)
	case unix.S_IFCHR:
		if st.Rdev == 0 && !u.plain {
			return u.whiteout(rel, name, h)
		}
		return fmt.Errorf("/%s: a device node (%d:%d) cannot be stored in a snapshot; remove it", p, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	case unix.S_IFBLK:
		return fmt.Errorf("/%s: a block device (%d:%d) cannot be stored in a snapshot; remove it", p, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		h.Typeflag = tar.TypeFifo // recorded, never opened
		return u.header(h)
	case unix.S_IFSOCK:
		u.skip(p, "socket")
		return nil
	}
	return fmt.Errorf("/%s: unknown file type %#o", p, st.Mode&unix.S_IFMT)
}

func (u *upper) dir(dirfd int, name, p string, st *unix.Stat_t, h *tar.Header, depth int) error {
	fd, err := openSame(dirfd, name, unix.O_DIRECTORY, st)
	if err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	defer unix.Close(fd)
	for _, x := range unsupportedXattr {
		if _, ok := xattr(fd, x); ok && !u.plain {
			return fmt.Errorf("/%s: has overlay attribute %s (redirect_dir or metacopy), which one layer cannot express; mount the snapshotter without them", p, x)
		}
	}
	h.Typeflag, h.Name = tar.TypeDir, p+"/"
	if err := u.header(h); err != nil {
		return err
	}
	for _, x := range opaqueXattrs {
		if u.plain {
			break
		}
		if v, ok := xattr(fd, x); ok && v == "y" {
			if err := u.opaque(p, h); err != nil {
				return err
			}
			break
		}
	}
	return u.walk(fd, p, depth+1)
}

func (u *upper) file(dirfd int, name, p string, st *unix.Stat_t, h *tar.Header) error {
	id := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs between architectures
	if first, ok := u.files[id]; ok && st.Nlink > 1 {
		h.Typeflag, h.Linkname = tar.TypeLink, first
		return u.header(h)
	}
	if err := u.charge("/"+p, st.Size); err != nil {
		return err
	}
	fd, err := openSame(dirfd, name, 0, st)
	if err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	for _, x := range unsupportedXattr {
		if _, ok := xattr(fd, x); ok && !u.plain {
			return fmt.Errorf("/%s: has overlay attribute %s (metacopy), whose data is in a lower layer; mount the snapshotter without metacopy", p, x)
		}
	}
	h.Typeflag, h.Size = tar.TypeReg, st.Size
	if err := u.header(h); err != nil {
		return err
	}
	if n, err := io.CopyN(u.tw, f, st.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("/%s: shrank from %d to %d bytes: %w", p, st.Size, n, errChanged)
		}
		return fmt.Errorf("/%s: %w", p, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	if after.Size != st.Size || after.Mtim != st.Mtim {
		return fmt.Errorf("/%s: %w", p, errChanged)
	}
	u.files[id] = p
	return nil
}

// openSame opens name under dirfd for reading without following a link, and checks it is
// still the inode st describes: the entry may have been swapped since it was listed. The first
// open is O_PATH, which has no effect on the file (a device or FIFO swapped in is never really
// opened); only the checked inode is reopened, through its /proc/self/fd link.
func openSame(dirfd int, name string, flags int, st *unix.Stat_t) (int, error) {
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var got unix.Stat_t
	if err := unix.Fstat(pfd, &got); err != nil {
		return -1, err
	}
	if got.Dev != st.Dev || got.Ino != st.Ino || got.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		return -1, errChanged
	}
	return unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0)
}

// xattr reads attribute name of the open file fd; ok is false when it is absent or unreadable.
func xattr(fd int, name string) (string, bool) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(fd, name, buf)
	if err != nil {
		return "", false
	}
	return string(bytes.TrimRight(buf[:n], "\x00")), true
}

func headerOf(p string, st *unix.Stat_t) *tar.Header {
	return &tar.Header{
		Name:    p,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()).UTC(),
	}
}
