package pathsafe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchDepth is the directory depth BenchmarkResolveDeep resolves: below MaxDepth, so the path is
// accepted and fully walked.
const benchDepth = 200

// BenchmarkResolveDeep resolves a path through benchDepth existing directories, each one a
// component that must be checked for a symlink.
func BenchmarkResolveDeep(b *testing.B) {
	r, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	parts := make([]string, benchDepth)
	for i := range parts {
		parts[i] = "d"
	}
	p := strings.Join(parts, "/")
	if err := os.MkdirAll(filepath.Join(r.Dir(), p), 0o755); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, err := r.Resolve(p)
		if err != nil || got != p {
			b.Fatalf("Resolve = %q, %v", got, err)
		}
	}
}
