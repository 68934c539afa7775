package pathsafe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLexical(t *testing.T) {
	cases := []struct {
		name, root, in, want string
		err                  error
	}{
		{name: "empty is the root", root: "/ws", in: "", want: "."},
		{name: "dot", root: "/ws", in: ".", want: "."},
		{name: "plain", root: "/ws", in: "a/b.txt", want: "a/b.txt"},
		{name: "inner dotdot", root: "/ws", in: "a/../b", want: "b"},
		{name: "root itself absolute", root: "/ws", in: "/ws", want: "."},
		{name: "under root absolute", root: "/ws", in: "/ws/a/b", want: "a/b"},
		{name: "other absolute is re-rooted", root: "/ws", in: "/etc/passwd", want: "etc/passwd"},
		{name: "sibling prefix is re-rooted", root: "/ws", in: "/ws-evil/f", want: "ws-evil/f"},
		{name: "absolute dotdot folds at slash", root: "/ws", in: "/../etc", want: "etc"},
		{name: "slash", root: "/ws", in: "/", want: "."},
		{name: "root slash", root: "/", in: "/a", want: "a"},
		{name: "dotdot", root: "/ws", in: "..", err: ErrEscapes},
		{name: "traversal", root: "/ws", in: "../etc/passwd", err: ErrEscapes},
		{name: "deep traversal", root: "/ws", in: "a/../../b", err: ErrEscapes},
		{name: "nul", root: "/ws", in: "a\x00b", err: ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Lexical(tc.root, tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Lexical(%q, %q) error = %v, want %v", tc.root, tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lexical(%q, %q) (-want +got):\n%s", tc.root, tc.in, diff)
			}
		})
	}
}

// fixture builds a root with regular files, inner symlinks and symlinks that escape, next to an
// "outside" directory holding a secret.
func fixture(t testing.TB) (*Root, string) {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	rootDir := filepath.Join(base, "root")
	for _, d := range []string{outside, filepath.Join(rootDir, "dir/sub"), rootDir + "-evil"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(outside, "secret"):        "secret",
		filepath.Join(rootDir, "file.txt"):      "inside",
		filepath.Join(rootDir, "dir/sub/f.txt"): "deep",
		filepath.Join(rootDir+"-evil", "f"):     "sibling",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"in-rel":     "dir/sub",
		"in-abs":     filepath.Join(rootDir, "dir"),
		"dir/up":     "..",
		"out-abs":    outside,
		"out-rel":    "../outside",
		"dir/out":    "../../outside/secret",
		"sibling":    "../root-evil",
		"loop-a":     "loop-b",
		"loop-b":     "loop-a",
		"dangling":   "no/such/file",
		"chain":      "in-rel/../../out-rel",
		"dir/sub/go": "../../in-rel/f.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(rootDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, outside
}

func TestResolve(t *testing.T) {
	r, _ := fixture(t)
	cases := []struct {
		in, want string
		escape   bool
	}{
		{in: "file.txt", want: "file.txt"},
		{in: "/file.txt", want: "file.txt"},
		{in: r.Dir() + "/dir/sub/f.txt", want: "dir/sub/f.txt"},
		{in: "in-rel/f.txt", want: "dir/sub/f.txt"},
		{in: "in-abs/sub", want: "dir/sub"},
		{in: "dir/up/file.txt", want: "file.txt"},
		{in: "dir/sub/go", want: "dir/sub/f.txt"},
		{in: "new/dir/file", want: "new/dir/file"},
		{in: "in-rel/new-file", want: "dir/sub/new-file"},
		{in: "dangling", want: "no/such/file"},
		{in: "file.txt/below", want: "file.txt/below"},
		{in: "../outside/secret", escape: true},
		{in: "out-abs", escape: true},
		{in: "out-abs/secret", escape: true},
		{in: "out-rel/secret", escape: true},
		{in: "out-rel/new-file", escape: true},
		{in: "out-rel/new/deeper/file", escape: true},
		{in: "dir/out", escape: true},
		{in: "sibling/f", escape: true},
		{in: "chain/secret", escape: true},
	}
	for _, tc := range cases {
		got, err := r.Resolve(tc.in)
		if tc.escape {
			if !IsEscape(err) {
				t.Errorf("Resolve(%q) = %q, %v; want an escape error", tc.in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q) error: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Resolve(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestResolveLoopAndNoFollow(t *testing.T) {
	r, _ := fixture(t)
	if _, err := r.Resolve("loop-a"); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("Resolve(loop-a) error = %v, want ELOOP", err)
	}
	for in, want := range map[string]string{"out-abs": "out-abs", "in-rel/f.txt": "dir/sub/f.txt", "loop-a": "loop-a"} {
		got, err := r.ResolveNoFollow(in)
		if err != nil || got != want {
			t.Errorf("ResolveNoFollow(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestOpenRefusesEmptyRoot(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Fatal("Open(\"\") succeeded; an empty root must be refused rather than default to /")
	}
}

// FuzzResolve checks the confinement property on arbitrary input: whatever Resolve returns is a
// local path, and when it names something that exists, the kernel's own resolution of it stays
// inside the root and os.Root can open it.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{"file.txt", "../x", "out-rel/secret", "in-rel/../../out-abs", "/"} {
		f.Add(seed)
	}
	r, outside := fixture(f)
	f.Fuzz(func(t *testing.T, in string) {
		for _, follow := range []bool{true, false} {
			got, err := r.resolve(context.Background(), in, follow)
			if err != nil {
				continue
			}
			if got != "." && !filepath.IsLocal(got) {
				t.Fatalf("resolve(%q, %v) = %q, not a local path", in, follow, got)
			}
			abs := r.Abs(got)
			real, err := filepath.EvalSymlinks(abs)
			if err != nil {
				continue // does not exist (yet): nothing to reach
			}
			if _, ok := Within(r.Dir(), real); !ok || strings.HasPrefix(real, outside) {
				if follow {
					t.Fatalf("resolve(%q) = %q which the kernel resolves to %q, outside %q", in, got, real, r.Dir())
				}
				continue // ResolveNoFollow keeps a final link by design; it is never read through
			}
			if follow {
				if _, err := r.FS().Lstat(got); err != nil && !IsEscape(err) {
					t.Fatalf("os.Root cannot stat resolved %q: %v", got, err)
				}
			}
		}
	})
}
