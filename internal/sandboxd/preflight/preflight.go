// Package preflight checks, before a sandboxd injected into somebody else's image serves, that
// the container can host it: commands would find the shells the sandbox APIs run, the sandbox
// root is writable, the service command exists, and nothing sandboxd runs could read its tokens
// (not root, no CAP_SYS_PTRACE). Each problem names its cause and its fix, because the Sandbox
// controller shows them to the template's author (docs/byo-image.md).
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Problem is one reason the container cannot host sandboxd.
type Problem struct {
	Cause, Fix string
}

func (p Problem) String() string { return p.Cause + " (fix: " + p.Fix + ")" }

// Shell is a shell the sandbox APIs run commands with, and who needs it.
type Shell struct {
	Path, NeededBy, Fix string
}

// Config says what to check.
type Config struct {
	// Shells must each run `-c :`.
	Shells []Shell
	// RootDir is the sandbox root: it must be, or become, a writable directory.
	RootDir string
	// Command is the service's argv[0], looked up in the PATH sandboxd's commands inherit; empty
	// when sandboxd supervises no service.
	Command string
	// UID is sandboxd's effective uid; ProcStatus the text of /proc/self/status (Current fills both).
	UID        int
	ProcStatus string
	// ShellTimeout bounds each shell's run (10s when zero).
	ShellTimeout time.Duration
}

// Current fills UID and ProcStatus from the running process.
func (c Config) Current() (Config, error) {
	c.UID = os.Geteuid()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return c, fmt.Errorf("reading /proc/self/status to check capabilities: %w", err)
	}
	c.ProcStatus = string(b)
	return c, nil
}

// Check runs every check and returns the problems found, none when the container can host
// sandboxd.
func Check(ctx context.Context, c Config) []Problem {
	var problems []Problem
	problems = append(problems, identity(c.UID, c.ProcStatus)...)
	for _, sh := range c.Shells {
		if p, bad := shell(ctx, sh, c.ShellTimeout); bad {
			problems = append(problems, p)
		}
	}
	if p, bad := rootDir(c.RootDir); bad {
		problems = append(problems, p)
	}
	if c.Command != "" {
		if _, err := exec.LookPath(c.Command); err != nil {
			problems = append(problems, Problem{
				Cause: fmt.Sprintf("the container's command %q is not an executable in the image (%v)", c.Command, unwrapExec(err)),
				Fix:   "set the container's command to a program the image has, by absolute path or on its PATH",
			})
		}
	}
	return problems
}

// Message is the termination message of a failed preflight, within the kubelet's 4 KiB.
func Message(prefix string, problems []Problem) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	msg := prefix + strings.Join(parts, "; ")
	if len(msg) > 4000 {
		msg = msg[:4000] + "..."
	}
	return msg
}

// capSysPtrace is CAP_SYS_PTRACE's bit in the capability sets of /proc/<pid>/status.
const capSysPtrace = unix.CAP_SYS_PTRACE

// identity refuses what would let a command read a non-dumpable sandboxd: root, or
// CAP_SYS_PTRACE held now or gainable (bounding set without no_new_privs).
func identity(uid int, status string) []Problem {
	var problems []Problem
	if uid == 0 {
		problems = append(problems, Problem{
			Cause: "the container runs as root (uid 0), so the commands sandboxd runs could read its tokens",
			Fix:   "set securityContext.runAsUser (and runAsGroup) to a non-root uid such as 1000 in the template's pod spec, or use an image whose USER is not root",
		})
	}
	fields := statusFields(status)
	held := false
	for _, set := range []string{"CapEff", "CapPrm", "CapAmb"} {
		held = held || hasCap(fields[set], capSysPtrace)
	}
	gainable := hasCap(fields["CapBnd"], capSysPtrace) && strings.TrimSpace(fields["NoNewPrivs"]) != "1"
	if held || gainable {
		problems = append(problems, Problem{
			Cause: "the container holds or can gain CAP_SYS_PTRACE, with which a command could read sandboxd's memory and tokens",
			Fix:   "drop it: securityContext.capabilities.drop: [ALL] and allowPrivilegeEscalation: false on the container",
		})
	}
	return problems
}

func statusFields(status string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// hasCap reports whether the hexadecimal capability set hex has bit c; an unreadable set counts
// as holding it, so a status the check cannot parse never passes.
func hasCap(hex string, c int) bool {
	if hex == "" {
		return false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return err != nil || v&(1<<uint(c)) != 0
}

// shell runs sh.Path -c : with an empty environment.
func shell(ctx context.Context, sh Shell, timeout time.Duration) (Problem, bool) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh.Path, "-c", ":")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return Problem{}, false
	case errors.Is(err, fs.ErrNotExist):
		return Problem{Cause: fmt.Sprintf("the image has no %s, which %s", sh.Path, sh.NeededBy), Fix: sh.Fix}, true
	}
	detail := strings.TrimSpace(string(out))
	if line, _, _ := strings.Cut(detail, "\n"); line != "" {
		detail = ": " + line
	}
	return Problem{Cause: fmt.Sprintf("%s -c : fails in this image (%v%s), and %s", sh.Path, unwrapExec(err), detail, sh.NeededBy), Fix: sh.Fix}, true
}

// rootDir makes sure the sandbox root exists and is writable by sandboxd's user.
func rootDir(dir string) (Problem, bool) {
	fix := "mount a writable volume there (the controller mounts an emptyDir unless the container mounts one) or set SANDBOXD_ROOT_DIR to a writable directory"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Problem{Cause: fmt.Sprintf("the sandbox root %s cannot be created (%v)", dir, unwrapPath(err)), Fix: fix}, true
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return Problem{Cause: fmt.Sprintf("the sandbox root %s is not writable by uid %d (%v)", dir, os.Geteuid(), err), Fix: fix}, true
	}
	return Problem{}, false
}

func unwrapExec(err error) error {
	var e *exec.Error
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}

func unwrapPath(err error) error {
	var e *fs.PathError
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}
