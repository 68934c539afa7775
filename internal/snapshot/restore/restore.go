// Package restore copies a volume captured in a snapshot image (layer.VolumesDir/<name>) into
// the fresh volume of a Sandbox started from it, before its containers start (the restore init
// container, `paddock-snapshot restore`). Only an empty volume is restored: a volume that holds
// anything is the Sandbox's own, newer state (a resumed Sandbox keeps its PVC) and is never
// overwritten. The copy goes to a staging directory in the volume and is moved into place only
// once complete, so an init container killed half way starts over on its next run rather than
// taking a half-restored volume for the Sandbox's state.
//
// The source is the image's own tree, written by the capture; the destination is the volume.
// Every call is relative to a directory descriptor, nothing is followed: symlinks are created
// as symlinks, hard links only to files this restore created, and no device node is made.
package restore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/snapshot/fsat"
)

// Names in the volume's root during a restore: staging holds a copy in progress, done a
// complete copy whose entries are being moved to the root.
const (
	staging = ".paddock-restore"
	done    = ".paddock-restore.done"
)

// lostFound is what a new ext4 file system holds; an otherwise empty volume is still fresh.
const lostFound = "lost+found"

// Outcome says what a restore did.
type Outcome string

const (
	// Restored means the volume was empty and now holds the captured tree.
	Restored Outcome = "restored"
	// Kept means the volume held data, which is kept as it is.
	Kept Outcome = "kept"
)

// Volume restores the directory src (the captured volume root in the image) into the volume
// mounted at dst when dst is fresh, and reports what it did.
func Volume(src, dst string) (Outcome, error) {
	sfd, err := openDir(unix.AT_FDCWD, src)
	if err != nil {
		return "", fmt.Errorf("opening the captured volume %s: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := openDir(unix.AT_FDCWD, dst)
	if err != nil {
		return "", fmt.Errorf("opening the volume %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	names, err := fsat.ReadNames(dfd)
	if err != nil {
		return "", fmt.Errorf("listing the volume %s: %w", dst, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == lostFound })
	switch {
	case slices.Contains(names, done) && isDir(dfd, done):
		// A complete copy was being moved into place: finish the move.
	case len(names) == 1 && names[0] == staging && isDir(dfd, staging):
		// A copy was cut short: start over.
		if err := os.RemoveAll(path.Join(dst, staging)); err != nil {
			return "", fmt.Errorf("removing the unfinished restore %s: %w", path.Join(dst, staging), err)
		}
		fallthrough
	case len(names) == 0:
		if err := copyToStaging(sfd, dfd); err != nil {
			return "", err
		}
	default:
		return Kept, nil
	}
	if err := moveIntoPlace(dfd); err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return "", err
	}
	if err := setAttrs(dfd, "", &st, 0); err != nil {
		return "", fmt.Errorf("the volume's root: %w", err)
	}
	return Restored, unix.Syncfs(dfd)
}

// copyToStaging copies the tree of sfd into a new staging directory of dfd, flushes it, then
// renames it to done.
func copyToStaging(sfd, dfd int) error {
	if err := unix.Mkdirat(dfd, staging, 0o700); err != nil {
		return fmt.Errorf("creating %s in the volume: %w", staging, err)
	}
	tfd, err := openDir(dfd, staging)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	c := &copier{root: tfd, links: map[[2]uint64]string{}}
	if err := c.tree(sfd, tfd, ""); err != nil {
		return err
	}
	if err := unix.Syncfs(tfd); err != nil {
		return err
	}
	return unix.Renameat(dfd, staging, dfd, done)
}

// moveIntoPlace moves every entry of done into the volume's root, then removes done. An entry
// already in the root was moved by an earlier run (the Sandbox's containers have not started
// while done exists) and is not overwritten.
func moveIntoPlace(dfd int) error {
	ffd, err := openDir(dfd, done)
	if err != nil {
		return err
	}
	defer unix.Close(ffd)
	names, err := fsat.ReadNames(ffd)
	if err != nil {
		return err
	}
	for _, n := range names {
		err := renameNoReplace(ffd, n, dfd)
		if errors.Is(err, unix.EEXIST) {
			// Only the new file system's own lost+found, or a volume whose code made a
			// directory of this reserved name: what is in the root wins.
			continue
		}
		if err != nil {
			return fmt.Errorf("moving %s into the volume: %w", n, err)
		}
	}
	return os.RemoveAll("/proc/self/fd/" + strconv.Itoa(dfd) + "/" + done)
}

// copier copies a tree; links maps a source inode to the first path (relative to root) it was
// copied to, for hard links.
type copier struct {
	root  int
	links map[[2]uint64]string
}

func (c *copier) tree(sfd, dfd int, rel string) error {
	names, err := fsat.ReadNames(sfd)
	if err != nil {
		return fmt.Errorf("listing /%s: %w", rel, err)
	}
	for _, n := range names {
		if err := c.entry(sfd, dfd, rel, n); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) entry(sfd, dfd int, rel, name string) error {
	p := path.Join(rel, name)
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		s, err := openDir(sfd, name)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		defer unix.Close(s)
		d, err := openDir(dfd, name)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		defer unix.Close(d)
		if err := c.tree(s, d, p); err != nil {
			return err
		}
		// After the children, which would change its modification time.
		return setAttrs(d, "", &st, 0)
	case unix.S_IFREG:
		id := [2]uint64{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs between architectures
		if first, ok := c.links[id]; ok && st.Nlink > 1 {
			return unix.Linkat(c.root, first, dfd, name, 0)
		}
		if err := c.file(sfd, dfd, name, &st); err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		c.links[id] = p
		return nil
	case unix.S_IFLNK:
		target, err := fsat.Readlink(sfd, name)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		return setAttrs(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFIFO:
		if err := unix.Mknodat(dfd, name, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		return setAttrs(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return fmt.Errorf("/%s: file type %#o is not restored (a capture stores none)", p, st.Mode&unix.S_IFMT)
}

// file copies a regular file's content, then its owner, mode and times.
func (c *copier) file(sfd, dfd int, name string, st *unix.Stat_t) error {
	in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(in), name)
	defer src.Close()
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(out), name)
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	return setAttrs(out, "", st, 0)
}

// setAttrs gives name under fd (fd itself when name is empty) st's owner, mode and times. The
// mode comes after the owner, which clears set-user-ID bits; a symlink has no mode of its own.
func setAttrs(fd int, name string, st *unix.Stat_t, flags int) error {
	if name == "" {
		if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
			return err
		}
		// Through the descriptor's /proc link: the file itself, whatever its name now.
		return unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), times(st), 0)
	}
	if err := unix.Fchownat(fd, name, int(st.Uid), int(st.Gid), flags); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := unix.Fchmodat(fd, name, st.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	return unix.UtimesNanoAt(fd, name, times(st), flags)
}

func times(st *unix.Stat_t) []unix.Timespec { return []unix.Timespec{st.Atim, st.Mtim} }

func openDir(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// renameNoReplace moves name from one directory to another unless the target exists. Kernels
// and gVisor versions without RENAME_NOREPLACE get a check, then a rename: nothing else runs
// in the Pod while its init containers do.
func renameNoReplace(from int, name string, to int) error {
	err := unix.Renameat2(from, name, to, name, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	var st unix.Stat_t
	switch err := unix.Fstatat(to, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return unix.EEXIST
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	return unix.Renameat(from, name, to, name)
}

// isDir reports whether name under dirfd is a directory itself, not a link to one.
func isDir(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}
