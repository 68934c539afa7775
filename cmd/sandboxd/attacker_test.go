package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/test/framework"
)

// runMainEnv makes the test binary run sandboxd's main instead of the tests, so a test can start
// the real daemon as another user without building it.
const runMainEnv = "PADDOCK_SANDBOXD_TEST_RUN_MAIN"

// getEnv makes the test binary GET the URL it names and print "STATUS <code>": an HTTP client
// for commands sandboxd runs, which have no curl on every machine.
const getEnv = "PADDOCK_SANDBOXD_TEST_GET"

// specEnvironEnv points the sandboxd that runMainEnv starts at a fake /proc/gvisor/spec_environ.
const specEnvironEnv = "PADDOCK_SANDBOXD_TEST_SPEC_ENVIRON"

func TestMain(m *testing.M) {
	// Commands inherit runMainEnv from the sandboxd that runs them: the client comes first.
	if url := os.Getenv(getEnv); url != "" {
		resp, err := http.Get(url)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("STATUS", resp.StatusCode)
		os.Exit(0)
	}
	if os.Getenv(runMainEnv) == "1" {
		if path := os.Getenv(specEnvironEnv); path != "" {
			specEnvironPath = path
		}
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// sandboxUID is the unprivileged user sandboxd and its commands run as, like the templates'
// runAsUser.
const sandboxUID = 1000

func randomToken(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestCommandsCannotReadTheTokens is code inside the sandbox trying to read sandboxd's
// credentials: sandboxd runs as an unprivileged user with both tokens in its environment, as in
// a Pod, and the commands it runs for a client (same user) try every way to read them.
func TestCommandsCannotReadTheTokens(t *testing.T) {
	legacyPort, restPort := freePort(t), freePort(t)
	d := startAsSandboxUser(t, "--legacy-port="+strconv.Itoa(legacyPort), "--rest-port="+strconv.Itoa(restPort))
	cmd, token, control := d.cmd, d.token, d.control
	bin := cmd.Path
	execute := func(ctx context.Context, script string) (legacyResult, error) {
		body, _ := json.Marshal(map[string]string{"command": "sh -c " + strconv.Quote(script)})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/execute", legacyPort), strings.NewReader(string(body)))
		if err != nil {
			return legacyResult{}, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return legacyResult{}, err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res legacyResult
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &res) != nil {
			return legacyResult{}, fmt.Errorf("POST /execute = %d %s", resp.StatusCode, raw)
		}
		return res, nil
	}
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.Eventually(t, func(ctx context.Context) error { _, err := execute(ctx, "true"); return err })

	pid := strconv.Itoa(cmd.Process.Pid)
	if res, _ := execute(ctx, "id -u"); strings.TrimSpace(res.Stdout) != strconv.Itoa(sandboxUID) {
		t.Fatalf("commands run as uid %q, want %d", res.Stdout, sandboxUID)
	}
	attempts := tokenAttempts(pid)
	for _, a := range attempts {
		res, err := execute(ctx, a.script)
		if err != nil {
			t.Fatalf("%s: %v", a.what, err)
		}
		out := res.Stdout + res.Stderr
		leaked := strings.Contains(out, token) || strings.Contains(out, control)
		opened := strings.Contains(res.Stdout, "-OPENED") || strings.Contains(res.Stdout, "-LISTED") || strings.Contains(res.Stdout, "MAPS-READ")
		held := !leaked && !opened
		t.Logf("tried %-60s exit %d: held=%v %s", a.what+" ("+a.script+")", res.ExitCode, held, firstLine(res.Stderr))
		if !held {
			t.Errorf("%s: a command read sandboxd's credentials or process (exit %d):\n%s", a.what, res.ExitCode, out)
		}
	}

	// The port-forward is served without a token (the default --accept-port-forward): its socket
	// is root's on loopback, as this test's own. A command on the same loopback is not.
	for name, port := range map[string]int{"REST": restPort, "legacy": legacyPort} {
		url := fmt.Sprintf("http://127.0.0.1:%d/%s", port, map[string]string{"REST": "v1/files/", "legacy": "list/"}[name])
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s API without a token from root on loopback (the port-forward's shape): %d, want 200", name, resp.StatusCode)
		}
		res, err := execute(ctx, getEnv+"="+url+" "+bin)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tried the %s API on loopback without a token from a command: %s", name, strings.TrimSpace(res.Stdout+res.Stderr))
		if !strings.Contains(res.Stdout, "STATUS 401") {
			t.Errorf("%s API on loopback without a token from a command (uid %d): %q, want 401", name, sandboxUID, res.Stdout+res.Stderr)
		}
	}
}

// sandboxdUnderTest is the real daemon started as the sandbox's user with both tokens in its
// environment, as in a Pod.
type sandboxdUnderTest struct {
	cmd            *exec.Cmd
	token, control string
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to start sandboxd and its commands as uid %d; run as root (CI does)", sandboxUID)
	}
}

// sandboxUserDir is a new directory that uid sandboxUID owns, under parents it may traverse.
func sandboxUserDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, sandboxUID, sandboxUID); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startAsSandboxUser starts the test binary as sandboxd (runMainEnv) as uid sandboxUID, on
// loopback ports, with extra flags and arguments after the defaults; it is killed at cleanup,
// when its log is shown if the test failed.
func startAsSandboxUser(t *testing.T, extra ...string) *sandboxdUnderTest {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "sandboxd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, bin)
	root := sandboxUserDir(t)
	d := &sandboxdUnderTest{token: randomToken(t, "sandbox-"), control: randomToken(t, "control-")}
	args := append([]string{"--listen-host=127.0.0.1", "--root-dir=" + root,
		"--grpc-port=" + strconv.Itoa(freePort(t)), "--rest-port=" + strconv.Itoa(freePort(t)), "--envd-port=0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnviron(os.Environ()), runMainEnv+"=1", sandboxd.TokenEnv+"="+d.token, sandboxd.ControlTokenEnv+"="+d.control)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID}, Setpgid: true}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.cmd = cmd
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sandboxd log:\n%s", logs.String())
		}
	})
	return d
}

// attempt is one way code inside the sandbox tries to read sandboxd's tokens.
type attempt struct{ what, script string }

// tokenAttempts are the ways a process of the sandbox's user tries to read the tokens of the
// sandboxd whose pid is pid. A script that gets into sandboxd's memory, files or map prints a
// marker ending in -OPENED, -LISTED or MAPS-READ.
func tokenAttempts(pid string) []attempt {
	return []attempt{
		{"its own environment", "env"},
		{"sandboxd's environment", "cat /proc/" + pid + "/environ"},
		{"sandboxd's environment through its thread", "cat /proc/" + pid + "/task/" + pid + "/environ"},
		{"its parent's environment", "cat /proc/$PPID/environ"},
		{"pid 1's environment (sandboxd in a Pod)", "cat /proc/1/environ"},
		{"sandboxd's command line", "cat /proc/" + pid + "/cmdline"},
		{"sandboxd's memory (opening it is what ptrace access allows)", "exec 3</proc/" + pid + "/mem && echo MEM-OPENED"},
		{"sandboxd's open files", "ls -l /proc/" + pid + "/fd/ && echo FD-LISTED"},
		{"sandboxd's memory map", "cat /proc/" + pid + "/maps && echo MAPS-READ"},
		{"a search of the sandbox root and /tmp", "grep -rs -e sandbox- -e control- . /tmp 2>/dev/null | head -c 300; true"},
	}
}

type legacyResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
