package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

func TestWriteOverTheLimitKeepsTheOldFile(t *testing.T) {
	root, err := pathsafe.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := Write(root, "f", 0o644, strings.NewReader("old"), 0); err != nil {
		t.Fatal(err)
	}
	err = Write(root, "f", 0o644, strings.NewReader("far too long"), 5)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Write over the limit = %v, want ErrTooLarge", err)
	}
	if err := Write(root, "g", 0o644, strings.NewReader("12345"), 5); err != nil {
		t.Fatalf("Write of exactly the limit = %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(root.Dir(), "f"))
	entries, _ := os.ReadDir(root.Dir())
	if string(b) != "old" || len(entries) != 2 {
		t.Fatalf("after a refused write: f = %q, %d entries; want old and no temp file", b, len(entries))
	}
}

func TestMkdirOverAFileConflicts(t *testing.T) {
	root, err := pathsafe.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := Write(root, "f", 0o644, strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := Mkdir(root, "f", 0o755); err == nil {
		t.Fatal("Mkdir over a file succeeded")
	}
	if err := Mkdir(root, "d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Mkdir(root, "d/e", 0o755); err != nil {
		t.Fatalf("Mkdir of an existing directory = %v, want success", err)
	}
}
