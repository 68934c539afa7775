package interpreter

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// claimedEnv is a sandbox environment that changes as a claim arrives.
type claimedEnv struct {
	mu  sync.Mutex
	env []string
}

func (e *claimedEnv) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.env)
}

func (e *claimedEnv) set(env ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.env = env
}

// warmPID starts the default Python kernel as sandboxd does on a warm member and returns its pid
// once it is ready.
func warmPID(t *testing.T, s *Server) int {
	t.Helper()
	s.Warm()
	c, err := s.defaultContext(Python)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	k := c.k
	c.mu.Unlock()
	if k == nil {
		t.Fatal("Warm started no default Python kernel")
	}
	if err := k.waitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k.cmd.Process.Pid
}

// cellJSON runs code in the default context of lang (or in context id) and decodes what it
// printed as JSON into v.
func cellJSON(t *testing.T, url string, body map[string]any, v any) {
	t.Helper()
	lines := execute(t, url, body)
	if e := errorOf(lines); e != nil {
		t.Fatalf("%v: %v", body["code"], e)
	}
	if err := json.Unmarshal([]byte(stdout(lines, lineStdout)), v); err != nil {
		t.Fatalf("%v printed %q: %v", body["code"], stdout(lines, lineStdout), err)
	}
}

// TestWarmKernelTakesTheClaimEnvironment starts the default Python kernel before the claim, as a
// warm member does, then changes the sandbox's environment as claim settings do: the first cell
// runs in that same kernel and sees the new variables, a removed one gone, in os.environ and in
// the processes it starts; a later change does not reach a kernel that has run a cell.
func TestWarmKernelTakesTheClaimEnvironment(t *testing.T) {
	env := &claimedEnv{env: []string{"PATH=" + os.Getenv("PATH"), "BEFORE=1", "DROPPED=1"}}
	s, url := newServer(t, func(c *Config) { c.Environ = env.get })
	pid := warmPID(t, s)

	env.set("PATH="+os.Getenv("PATH"), "BEFORE=2", "TASK_ID=42")
	s.Warm()
	var got struct {
		PID                   int
		Before, Task, Dropped any
		Child                 string
	}
	cellJSON(t, url, map[string]any{"code": `import json, os, subprocess
print(json.dumps({"PID": os.getpid(), "Before": os.environ.get("BEFORE"), "Task": os.environ.get("TASK_ID"),
    "Dropped": os.environ.get("DROPPED"),
    "Child": subprocess.check_output(["sh", "-c", "echo $BEFORE $TASK_ID ${DROPPED-unset}"]).decode().strip()}))`}, &got)
	if got.PID != pid {
		t.Errorf("the first cell ran in pid %d, want the warm kernel %d", got.PID, pid)
	}
	if got.Before != "2" || got.Task != "42" || got.Dropped != nil || got.Child != "2 42 unset" {
		t.Errorf("the first cell after the change sees BEFORE=%v TASK_ID=%v DROPPED=%v, its child %q; want 2, 42, unset and \"2 42 unset\"",
			got.Before, got.Task, got.Dropped, got.Child)
	}

	env.set("PATH="+os.Getenv("PATH"), "BEFORE=3", "TASK_ID=43")
	var later struct{ Task any }
	cellJSON(t, url, map[string]any{"code": `import json, os; print(json.dumps({"Task": os.environ.get("TASK_ID")}))`}, &later)
	if later.Task != "42" {
		t.Errorf("a kernel that ran a cell took a later change: TASK_ID=%v, want 42 as it had", later.Task)
	}
}

// TestWarmKernelRestartsForStartOnlyVariables starts the kernel again when the change names a
// variable Python reads only as it starts (PYTHONPATH): the first cell imports from the new path.
func TestWarmKernelRestartsForStartOnlyVariables(t *testing.T) {
	mods := t.TempDir()
	if err := os.WriteFile(filepath.Join(mods, "claimmod.py"), []byte("VALUE = 'from the claim path'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := &claimedEnv{env: []string{"PATH=" + os.Getenv("PATH")}}
	s, url := newServer(t, func(c *Config) { c.Environ = env.get })
	pid := warmPID(t, s)

	env.set("PATH="+os.Getenv("PATH"), "PYTHONPATH="+mods)
	s.Warm()
	var got struct {
		PID   int
		Value string
	}
	cellJSON(t, url, map[string]any{"code": "import json, os, claimmod\nprint(json.dumps({'PID': os.getpid(), 'Value': claimmod.VALUE}))"}, &got)
	if got.Value != "from the claim path" {
		t.Errorf("claimmod.VALUE = %q", got.Value)
	}
	if got.PID == pid {
		t.Errorf("the kernel was not started again for PYTHONPATH (pid %d both times)", pid)
	}
}

// TestContextsCreatedBeforeTheChange: a JavaScript context started and not yet used takes the
// change inside Node; a bash one is started again with it.
func TestContextsCreatedBeforeTheChange(t *testing.T) {
	env := &claimedEnv{env: []string{"PATH=" + os.Getenv("PATH")}}
	_, url := newServer(t, func(c *Config) { c.Environ = env.get })
	ids := map[string]string{}
	for _, lang := range []string{JavaScript, Bash} {
		status, body := call(t, http.MethodPost, url+"/contexts", map[string]any{"language": lang})
		var c contextJSON
		if status != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
			t.Fatalf("create a %s context: %d %s", lang, status, body)
		}
		ids[lang] = c.ID
	}
	env.set("PATH="+os.Getenv("PATH"), "TASK_ID=42")
	js := execute(t, url, map[string]any{"code": "require('child_process').execSync('echo $TASK_ID').toString().trim() + ' ' + process.env.TASK_ID", "context_id": ids[JavaScript]})
	if got := mainText(js); got != "42 42" {
		t.Errorf("javascript after the change: %q (lines %v), want 42 42", got, js)
	}
	sh := execute(t, url, map[string]any{"code": "echo $TASK_ID", "context_id": ids[Bash]})
	if got := strings.TrimSpace(stdout(sh, lineStdout)); got != "42" {
		t.Errorf("bash after the change: %q (lines %v), want 42", got, sh)
	}
}
