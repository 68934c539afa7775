package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/test/framework"
)

// debianPython is the Python the interpreter's kernels run in these tests (hack/install-deps.sh).
const debianPython = "/usr/bin/python3"

// interpreterCall sends one request to the code interpreter on port with the given header (name
// "" for none) and returns the status and the body.
func interpreterCall(ctx context.Context, port int, method, path, body, header, value string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, sb.String(), sc.Err()
}

// cellOutput runs code in language with the sandbox token and returns what it printed and the
// text of its error, if any.
func cellOutput(ctx context.Context, t *testing.T, port int, token, language, code string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"code": code, "language": language})
	status, out, err := interpreterCall(ctx, port, http.MethodPost, "/execute", string(body), e2b.AccessTokenHeader, token)
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST /execute: %d %v\n%s", status, err, out)
	}
	var sb strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, k := range []string{"text", "value", "traceback"} {
			if s, ok := m[k].(string); ok {
				sb.WriteString(s)
			}
		}
	}
	return sb.String()
}

// TestInterpreterAsAnAttacker runs the real daemon as the sandbox's user with its tokens in its
// environment and attacks the code interpreter's port: no token, a wrong token, a locked warm
// member, and cells that try to read sandboxd's credentials or call its APIs without them.
func TestInterpreterAsAnAttacker(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Fatalf("%s is missing: run hack/install-deps.sh", debianPython)
	}
	port := freePort(t)
	d := startAsSandboxUser(t, "--interpreter-port="+strconv.Itoa(port), "--interpreter-python="+debianPython)
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.Eventually(t, func(ctx context.Context) error {
		status, _, err := interpreterCall(ctx, port, http.MethodGet, "/health", "", "", "")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("GET /health = %d", status)
		}
		return err
	})

	wrong := randomToken(t, "sandbox-")
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/execute", `{"code":"1"}`},
		{http.MethodGet, "/contexts", ""},
		{http.MethodPost, "/contexts", "{}"},
		{http.MethodPost, "/contexts/x/restart", ""},
		{http.MethodDelete, "/contexts/x", ""},
	} {
		for _, h := range []string{e2b.AccessTokenHeader, e2b.TrafficAccessTokenHeader, "Authorization"} {
			value := wrong
			if h == "Authorization" {
				value = "Bearer " + wrong
			}
			if status, body, err := interpreterCall(ctx, port, c.method, c.path, c.body, h, value); err != nil || status != http.StatusUnauthorized {
				t.Errorf("%s %s with another sandbox's token in %s: %d %v %s, want 401", c.method, c.path, h, status, err, body)
			}
		}
	}
	for _, h := range []string{e2b.AccessTokenHeader, e2b.TrafficAccessTokenHeader} {
		if status, body, err := interpreterCall(ctx, port, http.MethodGet, "/contexts", "", h, d.token); err != nil || status != http.StatusOK {
			t.Errorf("GET /contexts with the sandbox token in %s: %d %v %s", h, status, err, body)
		}
	}

	if out := cellOutput(ctx, t, port, d.token, "bash", "id -u"); strings.TrimSpace(out) != strconv.Itoa(sandboxUID) {
		t.Fatalf("cells run as uid %q, want %d", out, sandboxUID)
	}
	for _, a := range tokenAttempts(strconv.Itoa(d.cmd.Process.Pid)) {
		out := cellOutput(ctx, t, port, d.token, "bash", a.script)
		leaked := strings.Contains(out, d.token) || strings.Contains(out, d.control)
		opened := strings.Contains(out, "-OPENED") || strings.Contains(out, "-LISTED") || strings.Contains(out, "MAPS-READ")
		t.Logf("a bash cell tried %-50s held=%v %s", a.what, !leaked && !opened, firstLine(out))
		if leaked || opened {
			t.Errorf("%s: a cell read sandboxd's credentials or process:\n%s", a.what, out)
		}
	}
	pyOut := cellOutput(ctx, t, port, d.token, "python",
		"import os\nprint(dict(os.environ))\nfor p in ('/proc/%d/environ' % os.getppid(), '/proc/%d/cmdline' % os.getppid()):\n    try:\n        print(open(p, 'rb').read())\n    except OSError as e:\n        print(p, e)")
	if strings.Contains(pyOut, d.token) || strings.Contains(pyOut, d.control) || !strings.Contains(pyOut, "Permission denied") {
		t.Errorf("a python cell read sandboxd's credentials, or its environ was readable:\n%s", pyOut)
	}

	// A cell calling sandboxd's APIs on loopback without a token is not the port-forward.
	for name, path := range map[string]string{"interpreter": fmt.Sprintf("http://127.0.0.1:%d/contexts", port)} {
		out := cellOutput(ctx, t, port, d.token, "bash", getEnv+"="+path+" "+d.cmd.Path)
		t.Logf("a cell called the %s API without a token: %s", name, strings.TrimSpace(out))
		if !strings.Contains(out, "STATUS 401") {
			t.Errorf("the %s API from a cell without a token: %q, want 401", name, out)
		}
	}
}

// TestInterpreterLockedMember refuses the sandbox token on an unclaimed warm member until claim
// settings arrive; health stays open. The member's default Python kernel starts before the claim,
// with the environment of the sandbox's commands, and serves the first cell after it with the
// claim's variables (in os.environ and in the processes it starts) and still no token.
func TestInterpreterLockedMember(t *testing.T) {
	port, rest := freePort(t), freePort(t)
	d := startAsSandboxUser(t, "--interpreter-port="+strconv.Itoa(port), "--interpreter-python="+debianPython, "--require-claim",
		"--rest-port="+strconv.Itoa(rest))
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.Eventually(t, func(ctx context.Context) error {
		status, _, err := interpreterCall(ctx, port, http.MethodGet, "/health", "", "", "")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("GET /health = %d", status)
		}
		return err
	})
	for _, c := range []struct{ method, path, body string }{{http.MethodPost, "/execute", `{"code":"1"}`}, {http.MethodGet, "/contexts", ""}, {http.MethodPost, "/contexts", "{}"}} {
		if status, body, err := interpreterCall(ctx, port, c.method, c.path, c.body, e2b.AccessTokenHeader, d.token); err != nil || status != http.StatusForbidden {
			t.Errorf("%s %s with the sandbox token on a locked member: %d %v %s, want 403", c.method, c.path, status, err, body)
		}
		if status, body, err := interpreterCall(ctx, port, c.method, c.path, c.body, "", ""); err != nil || status != http.StatusForbidden {
			t.Errorf("%s %s without a token (the port-forward's shape) on a locked member: %d %v %s, want 403", c.method, c.path, status, err, body)
		}
	}

	var warm int
	framework.Eventually(t, func(context.Context) error {
		warm = childNamed(t, d.cmd.Process.Pid, "python3")
		if warm == 0 {
			return fmt.Errorf("no Python kernel under the locked sandboxd (pid %d) yet", d.cmd.Process.Pid)
		}
		return nil
	})
	framework.BindSandboxd(t, fmt.Sprintf("http://127.0.0.1:%d", rest), d.control,
		claim.Settings{ClaimName: "c", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "CLAIM_VAR", Value: "claimed"}}})
	out := cellOutput(ctx, t, port, d.token, "python", `import json, os, subprocess
print(json.dumps({"pid": os.getpid(), "environ": dict(os.environ),
    "started": open("/proc/self/environ", "rb").read().decode(errors="replace"),
    "child": subprocess.check_output(["sh", "-c", "echo $CLAIM_VAR"]).decode().strip()}))`)
	var got struct {
		PID     int               `json:"pid"`
		Environ map[string]string `json:"environ"`
		Started string            `json:"started"`
		Child   string            `json:"child"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the first cell after the claim printed %q: %v", out, err)
	}
	if got.PID != warm {
		t.Errorf("the first cell ran in pid %d, not in the kernel started before the claim (%d)", got.PID, warm)
	}
	if strings.Contains(got.Started, "CLAIM_VAR") {
		t.Errorf("the kernel's start environment has the claim's variable; it was not started before the claim: %q", got.Started)
	}
	if got.Environ["CLAIM_VAR"] != "claimed" || got.Child != "claimed" {
		t.Errorf("the claim's variable in the warm kernel: os.environ %q, a child process %q; want %q in both", got.Environ["CLAIM_VAR"], got.Child, "claimed")
	}
	if strings.Contains(out, d.token) || strings.Contains(out, d.control) {
		t.Errorf("the kernel started before the claim sees sandboxd's credentials:\n%s", out)
	}
	names := strings.Split(got.Started, "\x00")
	for name := range got.Environ {
		names = append(names, name)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "SANDBOXD_") {
			t.Errorf("the kernel started before the claim sees sandboxd's setting %q", name)
		}
	}
}

// childNamed is the pid of a child of parent whose command is comm, or 0.
func childNamed(t *testing.T, parent int, comm string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(stat[end+1:]))
		if string(stat[open+1:end]) == comm && len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	return 0
}
