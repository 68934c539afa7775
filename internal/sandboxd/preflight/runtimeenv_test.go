package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
)

// TestRuntimeEnv plays the runtimes on a fake proc root: stock gVisor's spec_environ holding the
// tokens, a runsc without it (Paddock's), runc (no /proc/gvisor at all), and files the check cannot
// read or understand.
func TestRuntimeEnv(t *testing.T) {
	const token, control = "tok-3f9a1c", "ctl-77b2e0"
	stock := "PATH=/usr/bin:/bin\x00SANDBOX_NAME=a\x00" + sandboxd.TokenEnv + "=" + token + "\x00" + sandboxd.ControlTokenEnv + "=" + control + "\x00HOME=/workspace\x00"
	tests := []struct {
		name string
		// setup makes the fake proc root and returns the path the check reads.
		setup func(t *testing.T, proc string) string
		// want holds fragments of the problem's cause; nil when there is no problem.
		want []string
	}{
		{"stock gVisor: the tokens in spec_environ", specEnviron(stock),
			[]string{"spec_environ", "stock gVisor", sandboxd.TokenEnv + ", " + sandboxd.ControlTokenEnv + " included", "could read its tokens"}},
		{"stock gVisor: only sandboxd's configuration", specEnviron("PATH=/bin\x00SANDBOXD_REQUIRE_CLAIM=true\x00"),
			[]string{"SANDBOXD_REQUIRE_CLAIM included"}},
		{"stock gVisor, a container without SANDBOXD_ variables", specEnviron("PATH=/bin\x00SANDBOX_NAME=a\x00X=SANDBOXD_TOKEN\x00"), nil},
		{"stock gVisor, an empty environment", specEnviron(""), nil},
		{"Paddock's runsc: /proc/gvisor without spec_environ", func(t *testing.T, proc string) string {
			mkdir(t, filepath.Join(proc, "gvisor"))
			return filepath.Join(proc, "gvisor", "spec_environ")
		}, nil},
		{"runc: no /proc/gvisor", func(_ *testing.T, proc string) string { return filepath.Join(proc, "gvisor", "spec_environ") }, nil},
		{"/proc/gvisor is a file", func(t *testing.T, proc string) string {
			write(t, filepath.Join(proc, "gvisor"), "")
			return filepath.Join(proc, "gvisor", "spec_environ")
		}, nil},
		{"unreadable: a directory where the file should be", func(t *testing.T, proc string) string {
			mkdir(t, filepath.Join(proc, "gvisor", "spec_environ"))
			return filepath.Join(proc, "gvisor", "spec_environ")
		}, []string{"cannot tell", "is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, exposed := RuntimeEnv(tt.setup(t, t.TempDir()))
			if exposed != (tt.want != nil) {
				t.Fatalf("RuntimeEnv exposed = %v (%q), want %v", exposed, p.Cause, tt.want != nil)
			}
			for _, w := range tt.want {
				if !strings.Contains(p.Cause, w) {
					t.Errorf("cause %q does not contain %q", p.Cause, w)
				}
			}
			if exposed && !strings.Contains(p.Fix, sandboxd.AllowTokenInRuntimeEnvEnv+"=true") || exposed && !strings.Contains(p.Fix, "hack/build-gvisor.sh") {
				t.Errorf("fix %q names neither the opt-in nor Paddock's runsc", p.Fix)
			}
			for _, secret := range []string{token, control} {
				if strings.Contains(p.String(), secret) {
					t.Errorf("the problem %q shows a token's value", p)
				}
			}
		})
	}
}

// A file sandboxd may not read is one its commands (same uid) may not read either.
func TestRuntimeEnvUnreadableByTheUser(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a mode-0000 file; run as a non-root user")
	}
	path := specEnviron(sandboxd.TokenEnv+"=t\x00")(t, t.TempDir())
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	if p, exposed := RuntimeEnv(path); exposed {
		t.Errorf("RuntimeEnv of an unreadable file = %q, want no problem", p)
	}
}

func specEnviron(content string) func(t *testing.T, proc string) string {
	return func(t *testing.T, proc string) string {
		mkdir(t, filepath.Join(proc, "gvisor"))
		path := filepath.Join(proc, "gvisor", "spec_environ")
		write(t, path, content)
		return path
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
}
