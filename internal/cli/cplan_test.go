package cli

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		arg  string
		want Location
	}{
		{"-", Location{Std: true}},
		{"agent:out/report.json", Location{Claim: "agent", Path: "out/report.json"}},
		{"agent:/workspace/x", Location{Claim: "agent", Path: "/workspace/x"}},
		{"agent:", Location{Claim: "agent", Path: "."}},
		{"pool-x7k2p.v2:a:b", Location{Claim: "pool-x7k2p.v2", Path: "a:b"}},
		{"./agent:x", Location{Path: "./agent:x"}},
		{"/tmp/a:b", Location{Path: "/tmp/a:b"}},
		{"Agent:x", Location{Path: "Agent:x"}}, // not a valid claim name, so a local path
		{"report.json", Location{Path: "report.json"}},
		{"dir/sub", Location{Path: "dir/sub"}},
	}
	for _, tt := range tests {
		got, err := ParseLocation(tt.arg)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", tt.arg, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseLocation(%q) (-want +got):\n%s", tt.arg, diff)
		}
	}
	if _, err := ParseLocation(""); err == nil {
		t.Error(`ParseLocation("") succeeded, want an error`)
	}
}

func TestParseCopyArgs(t *testing.T) {
	tests := []struct {
		src, dst, wantErr string
	}{
		{"./f", "agent:f", ""},
		{"agent:f", "-", ""},
		{"-", "agent:f", ""},
		{"a:f", "b:f", "both in sandboxes"},
		{"./f", "./g", "one side of paddock cp must be in a sandbox"},
		{"-", "-", "one side of paddock cp must be in a sandbox"},
		{"", "agent:f", "SRC: empty path"},
		{"./f", "", "DST: empty path"},
	}
	for _, tt := range tests {
		_, _, err := ParseCopyArgs(tt.src, tt.dst)
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("ParseCopyArgs(%q, %q) = %v, want error containing %q", tt.src, tt.dst, err, tt.wantErr)
		}
	}
}

func TestCopyTarget(t *testing.T) {
	tests := []struct {
		name     string
		srcBase  string
		srcIsDir bool
		dst      string
		at       Existing
		want     string
		wantErr  string
	}{
		{"file to a new name", "a.txt", false, "out/b.txt", Existing{}, "out/b.txt", ""},
		{"file over a file", "a.txt", false, "b.txt", Existing{Exists: true}, "b.txt", ""},
		{"file into a directory", "a.txt", false, "out", Existing{Exists: true, IsDir: true}, "out/a.txt", ""},
		{"file into a new directory by slash", "a.txt", false, "new/", Existing{}, "new/a.txt", ""},
		{"file into the root", "a.txt", false, ".", Existing{Exists: true, IsDir: true}, "a.txt", ""},
		{"directory to a new name", "src", true, "copy", Existing{}, "copy", ""},
		{"directory into a directory", "src", true, "/workspace/", Existing{Exists: true, IsDir: true}, "/workspace/src", ""},
		{"root into a directory", "", true, "here", Existing{Exists: true, IsDir: true}, "here", ""},
		{"directory over a file", "src", true, "f", Existing{Exists: true}, "", "f is a file; a directory cannot replace it"},
	}
	for _, tt := range tests {
		got, err := CopyTarget(tt.srcBase, tt.srcIsDir, tt.dst, tt.at, path.Join)
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
		if got != tt.want {
			t.Errorf("%s: CopyTarget = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		done, total int64
		want        string
	}{
		{0, 5 << 20, "copying f  0 B / 5.0 MiB  0%"},
		{3 << 19, 6 << 20, "copying f  1.5 MiB / 6.0 MiB  25%"},
		{2 << 30, 2 << 30, "copying f  2.0 GiB / 2.0 GiB  100%"},
		{1500, -1, "copying f  1.5 KiB"},
		{1023, 0, "copying f  1023 B"},
	}
	for _, tt := range tests {
		if got := Progress("f", tt.done, tt.total); got != tt.want {
			t.Errorf("Progress(%d, %d) = %q, want %q", tt.done, tt.total, got, tt.want)
		}
	}
}

// TestProgressLine: the status line is drawn only on a terminal and only for a large copy, and a
// rewound file takes its bytes back.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	small := newProgress(&out, true, "f", 10)
	small.add(10)
	small.finish()
	off := newProgress(&out, false, "f", 4<<20)
	off.add(4 << 20)
	off.finish()
	if out.Len() != 0 {
		t.Errorf("progress printed %q for a small copy or off a terminal, want nothing", out.String())
	}
	big := newProgress(&out, true, "f", 2<<20)
	big.add(1 << 20)
	big.add(1 << 20)
	big.finish()
	if got := out.String(); !strings.HasPrefix(got, "\rcopying f  1.0 MiB / 2.0 MiB  50%") || !strings.HasSuffix(got, "copying f  2.0 MiB / 2.0 MiB  100%\x1b[K\n") {
		t.Errorf("progress output %q, want a first line at 50%% and a last one at 100%%", got)
	}

	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	p := newProgress(&out, false, "f", 10)
	r := p.file(f).(*progressFile)
	if _, err := r.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seek(0, 0); err != nil || p.done != 0 {
		t.Errorf("after rewinding: done = %d, %v; want 0", p.done, err)
	}
}

func TestPlanLocal(t *testing.T) {
	root := filepath.Join(t.TempDir(), "src")
	for _, d := range []string{"a/b", "empty"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]fs.FileMode{"top.txt": 0o644, "a/run.sh": 0o755, "a/b/secret": 0o600} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("top.txt", filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	entries, total, err := planLocal(root, info, &warn)
	if err != nil {
		t.Fatal(err)
	}
	type brief struct {
		Rel  string
		Dir  bool
		Mode fs.FileMode
	}
	var got []brief
	for _, e := range entries {
		got = append(got, brief{e.rel, e.dir, e.mode})
	}
	want := []brief{{"", true, 0o755}, {"a", true, 0o755}, {"a/b", true, 0o755}, {"a/b/secret", false, 0o600},
		{"a/run.sh", false, 0o755}, {"empty", true, 0o755}, {"link.txt", false, 0o644}, {"top.txt", false, 0o644}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("planLocal (-want +got):\n%s", diff)
	}
	if wantTotal := int64(len("top.txt")*2 + len("a/run.sh") + len("a/b/secret")); total != wantTotal {
		t.Errorf("total = %d, want %d", total, wantTotal)
	}
	if !strings.Contains(warn.String(), "linkdir") {
		t.Errorf("warnings %q, want the symlinked directory named", warn.String())
	}
}
