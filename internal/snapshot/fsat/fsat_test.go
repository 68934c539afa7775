package fsat

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadNamesAndReadlink(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"c", "a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../etc/shadow", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	// Twice: the first read must leave the caller's descriptor usable from the start.
	for range 2 {
		names, err := ReadNames(fd)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a", "b", "c", "link"}; !slices.Equal(names, want) {
			t.Fatalf("ReadNames = %q, want %q", names, want)
		}
	}
	target, err := Readlink(fd, "link")
	if err != nil || target != "../../etc/shadow" {
		t.Fatalf("Readlink(link) = %q, %v; want the link's own target, unresolved", target, err)
	}
	if _, err := Readlink(fd, "a"); err == nil {
		t.Fatal("Readlink of a regular file: no error")
	}
}
