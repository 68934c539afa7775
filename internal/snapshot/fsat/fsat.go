// Package fsat holds the directory-descriptor reads that the capture (layer) and the restore
// share: both walk trees a sandbox wrote, so neither resolves a path that a link could redirect.
package fsat

import (
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// ReadNames lists the directory open at dirfd, sorted, from its start. It reads through a
// duplicate of the descriptor, so dirfd stays open; the duplicate shares dirfd's offset, which is
// why the read starts with a seek to the start.
func ReadNames(dirfd int) ([]string, error) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// Readlink reads the target of the symlink name in the directory open at dirfd.
func Readlink(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", fmt.Errorf("link target longer than %d bytes", unix.PathMax)
	}
	return string(buf[:n]), nil
}
