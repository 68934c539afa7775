// Package files implements sandboxd's file operations on the sandbox root: every path is
// confined by pathsafe and every operation goes through the root's os.Root. Writes are atomic
// (a temporary file in the target directory, fsync, rename), so a reader sees the old or the new
// complete file and a failed or cut-off upload leaves nothing behind.
package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// TempPrefix starts the name of every temporary upload file.
const TempPrefix = ".sandboxd-tmp-"

var (
	// ErrIsDirectory is returned when writing onto an existing directory.
	ErrIsDirectory = errors.New("target path is a directory")
	// ErrNotEmpty is returned when deleting a non-empty directory without recursive.
	ErrNotEmpty = errors.New("directory is not empty; pass recursive=true to remove it")
	// ErrRootDelete is returned when deleting the root without recursive.
	ErrRootDelete = errors.New("cannot delete the sandbox root; pass recursive=true to clear its contents")
	// ErrTooLarge is returned when an upload exceeds the size limit.
	ErrTooLarge = errors.New("upload exceeds the size limit")
)

// Entry describes one directory entry (the wire type FileEntry).
type Entry struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	Type       string `json:"type"`
	ModifiedAt string `json:"modified_at"`
	Mode       string `json:"mode"`
	// ModTime is the full-precision modification time, for the legacy API's float mod_time.
	ModTime time.Time `json:"-"`
}

// NewEntry describes info under name.
func NewEntry(name string, info fs.FileInfo) Entry {
	kind := "file"
	if info.IsDir() {
		kind = "directory"
	}
	return Entry{
		Name:       name,
		Size:       info.Size(),
		Type:       kind,
		ModifiedAt: info.ModTime().UTC().Truncate(time.Second).Format(time.RFC3339),
		Mode:       fmt.Sprintf("%04o", info.Mode().Perm()),
		ModTime:    info.ModTime(),
	}
}

// List returns the entries of the directory rel (already resolved) sorted by name. Symlinks are
// described by what they point to; links that escape the root or dangle are left out.
func List(root *pathsafe.Root, rel string) ([]Entry, error) {
	dir, err := root.FS().Open(rel)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	dirents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(dirents))
	for _, d := range dirents {
		info, err := d.Info()
		if err != nil {
			continue // removed while listing
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := root.Resolve(path.Join(rel, d.Name()))
			if err != nil {
				continue
			}
			if info, err = root.FS().Stat(target); err != nil {
				continue
			}
		}
		entries = append(entries, NewEntry(d.Name(), info))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

// Write atomically replaces rel (already resolved) with the content of r, creating parent
// directories. At most limit bytes are accepted when limit > 0; beyond that ErrTooLarge is
// returned and the target is left as it was.
func Write(root *pathsafe.Root, rel string, mode fs.FileMode, r io.Reader, limit int64) error {
	if rel == "." {
		return ErrIsDirectory
	}
	if info, err := root.FS().Stat(rel); err == nil && info.IsDir() {
		return ErrIsDirectory
	}
	dir := path.Dir(rel)
	if err := root.FS().MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, tmpName, err := createTemp(root.FS(), dir)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			_ = root.FS().Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	n, err := io.Copy(tmp, r)
	if err != nil {
		return err
	}
	if limit > 0 && n > limit {
		return fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := root.FS().Rename(tmpName, rel); err != nil {
		return err
	}
	committed = true
	return nil
}

func createTemp(r *os.Root, dir string) (*os.File, string, error) {
	for range 10 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := path.Join(dir, TempPrefix+hex.EncodeToString(b[:]))
		f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", errors.New("could not create a unique temporary file")
}

// Mkdir creates the directory rel (already resolved) and its parents with mode.
func Mkdir(root *pathsafe.Root, rel string, mode fs.FileMode) error {
	if info, err := root.FS().Stat(rel); err == nil && !info.IsDir() {
		return fmt.Errorf("%s: %w", rel, syscall.EEXIST)
	}
	return root.FS().MkdirAll(rel, mode)
}

// Delete removes rel (resolved without following a final symlink, so a link is removed rather
// than its target). Deleting the root clears its contents when recursive and is refused
// otherwise.
func Delete(root *pathsafe.Root, rel string, recursive bool) error {
	if _, err := root.FS().Lstat(rel); err != nil {
		return err
	}
	if rel == "." {
		if !recursive {
			return ErrRootDelete
		}
		return clearRoot(root)
	}
	var err error
	if recursive {
		err = root.FS().RemoveAll(rel)
	} else {
		err = root.FS().Remove(rel)
	}
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return ErrNotEmpty
	}
	return err
}

func clearRoot(root *pathsafe.Root) error {
	dir, err := root.FS().Open(".")
	if err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := root.FS().RemoveAll(name); err != nil {
			return err
		}
	}
	return nil
}
