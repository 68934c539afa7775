package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// status is a /proc/self/status with the given capability sets.
func status(eff, prm, bnd, amb, noNewPrivs string) string {
	return "Name:\tsandboxd\nUid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t" + prm +
		"\nCapEff:\t" + eff + "\nCapBnd:\t" + bnd + "\nCapAmb:\t" + amb + "\nNoNewPrivs:\t" + noNewPrivs + "\n"
}

const (
	none        = "0000000000000000"
	ptrace      = "0000000000080000" // bit 19
	dockerBnd   = "00000000a80425fb" // containerd's default set: no CAP_SYS_PTRACE
	fullBnd     = "000001ffffffffff"
	rootProblem = "runs as root"
	capProblem  = "CAP_SYS_PTRACE"
)

func TestIdentity(t *testing.T) {
	tests := []struct {
		name   string
		uid    int
		status string
		want   []string // a fragment of each problem's cause
	}{
		{"non-root, default bounding set", 1000, status(none, none, dockerBnd, none, "0"), nil},
		{"non-root, full bounding set with no_new_privs", 1000, status(none, none, fullBnd, none, "1"), nil},
		{"root", 0, status(none, none, dockerBnd, none, "0"), []string{rootProblem}},
		{"effective ptrace", 1000, status(ptrace, none, dockerBnd, none, "1"), []string{capProblem}},
		{"permitted ptrace", 1000, status(none, ptrace, dockerBnd, none, "1"), []string{capProblem}},
		{"ambient ptrace", 1000, status(none, none, dockerBnd, ptrace, "1"), []string{capProblem}},
		{"ptrace gainable without no_new_privs", 1000, status(none, none, fullBnd, none, "0"), []string{capProblem}},
		{"root with every capability", 0, status(fullBnd, fullBnd, fullBnd, none, "0"), []string{rootProblem, capProblem}},
		{"unparsable set counts as held", 1000, status("zz", none, dockerBnd, none, "1"), []string{capProblem}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range identity(tt.uid, tt.status) {
				got = append(got, fragment(p.Cause, rootProblem, capProblem))
				if p.Fix == "" {
					t.Errorf("problem %q has no fix", p.Cause)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func fragment(s string, fragments ...string) string {
	for _, f := range fragments {
		if strings.Contains(s, f) {
			return f
		}
	}
	return s
}

func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Check on this host's real shells and files: what the image lacks is named with its fix.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeScript(t, dir, "good-shell", "exit 0")
	broken := writeScript(t, dir, "broken-shell", "echo 'error while loading shared libraries: libc.so.6' >&2; exit 127")
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	ok := Config{UID: 1000, ProcStatus: status(none, none, dockerBnd, none, "1"), RootDir: filepath.Join(dir, "root"),
		Shells: []Shell{{Path: good, NeededBy: "x", Fix: "y"}}, Command: good}
	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"compatible", nil, nil},
		{"no shell", func(c *Config) {
			c.Shells = append(c.Shells, Shell{Path: filepath.Join(dir, "bash"), NeededBy: "E2B's SDKs run every command with", Fix: "use an image with bash"})
		}, []string{"the image has no " + filepath.Join(dir, "bash") + ", which E2B's SDKs run every command with (fix: use an image with bash)"}},
		{"a shell that cannot run", func(c *Config) {
			c.Shells = []Shell{{Path: broken, NeededBy: "commands need it", Fix: "f"}}
		}, []string{broken + " -c : fails in this image (exit status 127: error while loading shared libraries: libc.so.6), and commands need it (fix: f)"}},
		{"service command missing", func(c *Config) { c.Command = "no-such-program-in-path" }, []string{"no-such-program-in-path"}},
		{"root not creatable", func(c *Config) {
			c.RootDir = filepath.Join(dir, "file", "root")
			mustWrite(t, filepath.Join(dir, "file"))
		}, []string{"cannot be created"}},
	}
	if os.Geteuid() != 0 {
		tests = append(tests, struct {
			name string
			edit func(*Config)
			want []string
		}{"root not writable", func(c *Config) { c.RootDir = readOnly }, []string{"is not writable"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Shells = append([]Shell(nil), ok.Shells...)
			if tt.edit != nil {
				tt.edit(&c)
			}
			var got []string
			for _, p := range Check(context.Background(), c) {
				got = append(got, p.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %q does not contain %q", got[i], tt.want[i])
				}
			}
		})
	}
}

func mustWrite(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMessage(t *testing.T) {
	got := Message("pre: ", []Problem{{"a", "b"}, {"c", "d"}})
	if want := "pre: a (fix: b); c (fix: d)"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	long := Message("pre: ", []Problem{{strings.Repeat("x", 5000), "y"}})
	if len(long) > 4096 || !strings.HasPrefix(long, "pre: xxx") {
		t.Errorf("a long message is %d bytes, want it cut under the kubelet's 4096", len(long))
	}
}
