package pathsafe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLimits(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deep := func(n int) string { return strings.TrimSuffix(strings.Repeat("d/", n), "/") }
	cases := []struct {
		name, in string
		tooLong  bool
	}{
		{"a name of 255 bytes", strings.Repeat("n", 255), false},
		{"a name of 256 bytes", strings.Repeat("n", 256), true},
		{"a name of 5000 bytes", strings.Repeat("n", 5000), true},
		{"256 levels", deep(256), false},
		{"257 levels", deep(257), true},
		{"4096 bytes", strings.Repeat(strings.Repeat("p", 15)+"/", 256)[:4096], false},
		{"4097 bytes", strings.Repeat("x", 200) + "/" + strings.Repeat(strings.Repeat("p", 200)+"/", 20), true},
		{"12,000 levels", deep(12000), true},
		{"long before cleaning, short after", strings.Repeat("a/../", 2000) + "f", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Resolve(tc.in)
			if got := errors.Is(err, ErrTooLong); got != tc.tooLong {
				t.Fatalf("Resolve(%d bytes) error = %v, want too long: %v", len(tc.in), err, tc.tooLong)
			}
			if !tc.tooLong && err != nil {
				t.Fatalf("Resolve(%d bytes) = %v", len(tc.in), err)
			}
		})
	}
}

// TestSymlinksCannotExceedTheDepth: the depth limit holds for the path symlinks expand to, not
// only for the path as sent.
func TestSymlinksCannotExceedTheDepth(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// l0 -> 200 levels of d/, l1 -> l0/<200 levels>: following l1 goes 400 levels deep.
	chain := strings.TrimSuffix(strings.Repeat("d/", 200), "/")
	if err := os.MkdirAll(filepath.Join(r.Dir(), chain, chain), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chain, filepath.Join(r.Dir(), "l0")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("l0/"+chain, filepath.Join(r.Dir(), "l1")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve("l0"); err != nil {
		t.Fatalf("Resolve(l0), 200 levels: %v", err)
	}
	if _, err := r.Resolve("l1/f"); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Resolve(l1/f), 401 levels = %v, want ErrTooLong", err)
	}
}

func TestResolveStopsWhenTheContextEnds(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Join(r.Dir(), "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.ResolveContext(ctx, "a/b/c"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ResolveContext with an ended context = %v, want context.Canceled", err)
	}
	if _, err := r.ResolveNoFollowContext(ctx, "a/b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ResolveNoFollowContext with an ended context = %v, want context.Canceled", err)
	}
}
