package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/sdk"
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

func TestRemoteErrorSaysWhatSandboxdMeant(t *testing.T) {
	loc := Location{Claim: "agent", Path: "../x"}
	tests := []struct {
		err  error
		want string
	}{
		{&sdk.HTTPError{Op: "stat ../x", StatusCode: 404}, "agent:../x does not exist in the sandbox (paths are relative to the sandbox root)"},
		{&sdk.HTTPError{Op: "stat ../x", StatusCode: 403}, "sandboxd refused agent:../x: the path leaves the sandbox root or is not accessible"},
		{&sdk.HTTPError{Op: "upload ../x", StatusCode: 409, Code: "CONFLICT", Message: "a parent of the path is a file"}, "agent:../x: sandbox runtime: upload ../x: CONFLICT (HTTP 409): a parent of the path is a file"},
	}
	for _, tt := range tests {
		got := remoteError(loc, tt.err)
		if !strings.HasPrefix(got.Error(), tt.want) || !errors.Is(got, tt.err) {
			t.Errorf("remoteError(%v) = %q, want it to start with %q and wrap the cause", tt.err, got, tt.want)
		}
	}
}
