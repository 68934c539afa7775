package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/test/framework"
)

// stockSandboxd starts sandboxd (the test binary's main) with its tokens in the environment, on a
// runtime that shows that environment to every process in a file, as stock gVisor's
// /proc/gvisor/spec_environ does; extraEnv is added to sandboxd's environment.
func stockSandboxd(ctx context.Context, t *testing.T, token, control string, extraEnv ...string) (cmd *exec.Cmd, out *bytes.Buffer, msgPath string, restPort int) {
	t.Helper()
	dir := t.TempDir()
	specEnviron := filepath.Join(dir, "spec_environ")
	env := []string{"PATH=/usr/bin:/bin", sandboxd.TokenEnv + "=" + token, sandboxd.ControlTokenEnv + "=" + control}
	if err := os.WriteFile(specEnviron, []byte(strings.Join(env, "\x00")+"\x00"), 0o444); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	msgPath = filepath.Join(dir, "termination-log")
	restPort = freePort(t)
	cmd = exec.CommandContext(ctx, self, "--termination-message-path="+msgPath, "--root-dir="+filepath.Join(dir, "root"), "--listen-host=127.0.0.1",
		fmt.Sprintf("--grpc-port=%d", freePort(t)), fmt.Sprintf("--rest-port=%d", restPort), "--legacy-port=0", "--envd-port=0")
	cmd.Env = append(childEnviron(os.Environ()), runMainEnv+"=1", specEnvironEnv+"="+specEnviron)
	cmd.Env = append(append(cmd.Env, env[1:]...), extraEnv...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out, msgPath, restPort
}

// On a runtime that shows its tokens to the commands, sandboxd refuses to start: the termination
// message (which the Sandbox controller shows) and its log name the cause, the fix and the opt-in,
// never a token.
func TestRefusesARuntimeThatShowsTheTokens(t *testing.T) {
	token, control := randomToken(t, "tok-"), randomToken(t, "ctl-")
	// A sandboxd that serves instead is killed at the deadline and fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultTimeout)
	defer cancel()
	cmd, out, msgPath, _ := stockSandboxd(ctx, t, token, control)
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sandboxd.PreflightExitCode {
		t.Fatalf("sandboxd on a runtime showing its tokens: %v, want exit code %d\n%s", err, sandboxd.PreflightExitCode, out)
	}
	msg, err := os.ReadFile(msgPath)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"termination message": string(msg), "log": out.String()} {
		for _, want := range []string{"spec_environ", sandboxd.TokenEnv, sandboxd.ControlTokenEnv, "hack/build-gvisor.sh", sandboxd.AllowTokenInRuntimeEnvEnv + "=true"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s %q does not contain %q", what, text, want)
			}
		}
		if strings.Contains(text, token) || strings.Contains(text, control) {
			t.Errorf("%s shows a token: %q", what, text)
		}
	}
	if !strings.HasPrefix(string(msg), sandboxd.PreflightMessagePrefix) {
		t.Errorf("termination message %q does not start with %q, which the controller looks for", msg, sandboxd.PreflightMessagePrefix)
	}
}

// With the opt-in, sandboxd serves there and says at start what it gives up.
func TestServesARuntimeThatShowsTheTokensWhenAllowed(t *testing.T) {
	token, control := randomToken(t, "tok-"), randomToken(t, "ctl-")
	cmd, out, msgPath, restPort := stockSandboxd(context.Background(), t, token, control, sandboxd.AllowTokenInRuntimeEnvEnv+"=true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	framework.Eventually(t, func(context.Context) error {
		select {
		case err := <-exited:
			t.Fatalf("sandboxd exited (%v) with the opt-in set, want it serving:\n%s", err, out)
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/health", restPort))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health = %d", resp.StatusCode)
		}
		return nil
	})
	_ = cmd.Process.Kill()
	t.Logf("sandboxd stopped: %v", <-exited)
	log := out.String()
	if !strings.Contains(log, "WARNING") || !strings.Contains(log, sandboxd.AllowTokenInRuntimeEnvEnv) || !strings.Contains(log, "spec_environ") {
		t.Errorf("sandboxd's log does not warn that the code can read its tokens:\n%s", log)
	}
	if strings.Contains(log, token) || strings.Contains(log, control) {
		t.Errorf("sandboxd's log shows a token:\n%s", log)
	}
	if _, err := os.Stat(msgPath); err == nil {
		t.Errorf("sandboxd wrote a termination message although it served")
	}
}
