package interpreter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// call sends a request with a JSON body (none when body is nil) and returns the status and body.
func call(t *testing.T, method, url string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Content-Type", "application/json") // as the SDK sends, even without a body
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stream starts POST /execute and returns a scanner over its lines; cancel closes the connection
// as the SDK's timeoutMs does.
func stream(t *testing.T, url string, body map[string]any) (*bufio.Scanner, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/execute", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		t.Errorf("the stream has Content-Type %q; E2B's server sends none", ct)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return bufio.NewScanner(resp.Body), cancel
}

// waitFor reads lines until one contains want.
func waitFor(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return
		}
	}
	t.Fatalf("the stream ended before a line with %q (%v)", want, sc.Err())
}

func TestContexts(t *testing.T) {
	_, url := newServer(t)
	status, body := call(t, http.MethodGet, url+"/health", nil)
	if status != http.StatusOK || body != "\"OK\"\n" {
		t.Errorf("health: %d %q", status, body)
	}
	status, body = call(t, http.MethodGet, url+"/contexts", nil)
	var list []contextJSON
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 2 || list[0].Language != Python || list[1].Language != JavaScript {
		t.Fatalf("list at start: %d %s, want the default python and javascript contexts", status, body)
	}
	if err := os.Mkdir(filepath.Join(list[0].Cwd, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	status, body = call(t, http.MethodPost, url+"/contexts", map[string]any{"cwd": "work"})
	var a contextJSON
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil || a.Language != Python || a.Cwd != filepath.Join(list[0].Cwd, "work") {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body = call(t, http.MethodPost, url+"/contexts", nil)
	var b contextJSON
	if status != http.StatusOK || json.Unmarshal([]byte(body), &b) != nil || b.Cwd != list[0].Cwd {
		t.Fatalf("create with an empty body: %d %s", status, body)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "import os\nsecret = 1\nos.getcwd()", "context_id": a.ID})); got != a.Cwd {
		t.Errorf("cwd of the context: %q, want %q", got, a.Cwd)
	}
	if e := errorOf(execute(t, url, map[string]any{"code": "secret", "context_id": b.ID})); e == nil || e["value"] != "name 'secret' is not defined" {
		t.Errorf("another context sees the first's state: %v", e)
	}
	execute(t, url, map[string]any{"code": "shared = 3"})
	if got := mainText(execute(t, url, map[string]any{"code": "shared", "language": "python"})); got != "3" {
		t.Errorf("runCode without a context and with language python do not share state: %q", got)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "shared", "context_id": list[0].ID})); got != "3" {
		t.Errorf("the listed default python context is not the default: %q", got)
	}
	status, body = call(t, http.MethodPost, url+"/contexts/"+a.ID+"/restart", nil)
	if status != http.StatusOK || body != "null\n" {
		t.Errorf("restart: %d %q", status, body)
	}
	if e := errorOf(execute(t, url, map[string]any{"code": "secret", "context_id": a.ID})); e == nil || e["name"] != "NameError" {
		t.Errorf("state survived a restart: %v", e)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "import os\nos.getcwd()", "context_id": a.ID})); got != a.Cwd {
		t.Errorf("cwd after restart: %q", got)
	}
	if status, body = call(t, http.MethodDelete, url+"/contexts/"+a.ID, nil); status != http.StatusOK {
		t.Errorf("delete: %d %s", status, body)
	}
	for _, c := range []struct{ method, path string }{{http.MethodDelete, "/contexts/" + a.ID}, {http.MethodPost, "/contexts/" + a.ID + "/restart"}, {http.MethodPost, "/execute"}} {
		var req any
		if c.path == "/execute" {
			req = map[string]any{"code": "1", "context_id": a.ID}
		}
		if status, body = call(t, c.method, url+c.path, req); status != http.StatusNotFound || body != "Context "+a.ID+" not found" {
			t.Errorf("%s %s on a removed context: %d %q", c.method, c.path, status, body)
		}
	}

	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"language": "r"}, `language "r" is not served`},
		{map[string]any{"cwd": "/no/such/dir"}, `cwd "/no/such/dir" is not a directory`},
	} {
		if status, body = call(t, http.MethodPost, url+"/contexts", c.body); status != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("create %v: %d %q, want 400 with %q", c.body, status, body, c.want)
		}
	}
	for _, c := range []struct {
		body   any
		status int
		want   string
	}{
		{map[string]any{"language": "python", "context_id": b.ID, "code": "1"}, http.StatusBadRequest, "not both"},
		{map[string]any{"language": nil, "context_id": nil, "env_vars": nil}, http.StatusUnprocessableEntity, "code is required"},
		{map[string]any{"code": 5}, http.StatusUnprocessableEntity, "must be a string"},
		{map[string]any{"code": "1", "env_vars": map[string]string{"1BAD": "x"}}, http.StatusBadRequest, `env_vars: "1BAD" is not a valid variable name`},
	} {
		if status, body = call(t, http.MethodPost, url+"/execute", c.body); status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("execute %v: %d %q, want %d with %q", c.body, status, body, c.status, c.want)
		}
	}
	// The Python SDK's nulls are accepted.
	if got := mainText(execute(t, url, map[string]any{"code": "2*3", "context_id": nil, "language": nil, "env_vars": nil})); got != "6" {
		t.Errorf("a body with nulls: %q", got)
	}
}

// TestInterrupt closes the connection of running cells, as the SDK's timeoutMs does: each
// language's cell stops and its context keeps its state.
func TestInterrupt(t *testing.T) {
	_, url := newServer(t)
	for _, c := range []struct{ lang, setup, block, check, want string }{
		{Python, "kept = 5", "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.01)", "kept", "5"},
		{JavaScript, "var kept = 6", "console.log('started'); while (true) {}", "kept", "6"},
		{JavaScript, "var kept2 = 7", "console.log('started'); await new Promise(() => {})", "kept2", "7"},
		{Bash, "KEPT=8", "echo started; while true; do sleep 0.01; done", "echo $KEPT", "8"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			execute(t, url, map[string]any{"code": c.setup, "language": c.lang})
			sc, cancel := stream(t, url, map[string]any{"code": c.block, "language": c.lang})
			waitFor(t, sc, "started")
			cancel()
			lines := execute(t, url, map[string]any{"code": c.check, "language": c.lang})
			got := mainText(lines)
			if c.lang == Bash {
				got = strings.TrimSpace(stdout(lines, lineStdout))
			}
			if got != c.want || errorOf(lines) != nil {
				t.Errorf("after the interrupt: %q, want %q (lines %v)", got, c.want, lines)
			}
		})
	}
}

// TestInterruptAwaitingJavaScriptSendsNoSignal: an awaiting JavaScript cell is interrupted by a
// request the driver reads, not by SIGINT, which outside synchronous evaluation may meet Node's
// default action and end the kernel; a listener the cells installed sees no signal.
func TestInterruptAwaitingJavaScriptSendsNoSignal(t *testing.T) {
	_, url := newServer(t)
	execute(t, url, map[string]any{"code": "var signalled = false; process.on('SIGINT', () => { signalled = true })", "language": JavaScript})
	sc, cancel := stream(t, url, map[string]any{"code": "console.log('started'); await new Promise(() => {})", "language": JavaScript})
	waitFor(t, sc, "started")
	cancel()
	lines := execute(t, url, map[string]any{"code": "signalled", "language": JavaScript})
	if got := mainText(lines); got != "false" || errorOf(lines) != nil {
		t.Errorf("signalled after interrupting an awaiting cell: %q (lines %v), want false", got, lines)
	}
}

// TestNeverEndingCell holds its own context only: other contexts run meanwhile.
func TestNeverEndingCell(t *testing.T) {
	_, url := newServer(t)
	sc, cancel := stream(t, url, map[string]any{"code": "print('spinning', flush=True)\nwhile True: pass"})
	defer cancel()
	waitFor(t, sc, "spinning")
	_, body := call(t, http.MethodPost, url+"/contexts", nil)
	var other contextJSON
	if err := json.Unmarshal([]byte(body), &other); err != nil {
		t.Fatal(body)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "1+1", "context_id": other.ID})); got != "2" {
		t.Errorf("another context while one spins: %q", got)
	}
	if got := strings.TrimSpace(stdout(execute(t, url, map[string]any{"code": "echo free", "language": "bash"}), lineStdout)); got != "free" {
		t.Errorf("bash while python spins: %q", got)
	}
}

// TestKernelCrash reports a kernel that dies in a cell and restarts it without its state.
func TestKernelCrash(t *testing.T) {
	_, url := newServer(t)
	execute(t, url, map[string]any{"code": "before = 1"})
	e := errorOf(execute(t, url, map[string]any{"code": "import os\nos._exit(3)"}))
	if e == nil || e["name"] != "KernelDied" || !strings.Contains(e["value"].(string), "exit status 3") {
		t.Fatalf("crash: %v", e)
	}
	lines := execute(t, url, map[string]any{"code": "1+1"})
	if mainText(lines) != "2" {
		t.Errorf("after the crash: %v", lines)
	}
	if e := errorOf(execute(t, url, map[string]any{"code": "before"})); e == nil || e["name"] != "NameError" {
		t.Errorf("state after a crash: %v", e)
	}
	// bash's exit ends the kernel the same way.
	if e := errorOf(execute(t, url, map[string]any{"code": "exit 4", "language": "bash"})); e == nil || e["name"] != "KernelDied" {
		t.Errorf("bash exit: %v", e)
	}
}

// TestRestartDuringCell ends the running cell with E2B's ContextRestarting error.
func TestRestartDuringCell(t *testing.T) {
	_, url := newServer(t)
	_, body := call(t, http.MethodPost, url+"/contexts", map[string]any{"language": "python"})
	var c contextJSON
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(body)
	}
	sc, cancel := stream(t, url, map[string]any{"code": "import time\nprint('in', flush=True)\ntime.sleep(600)", "context_id": c.ID})
	defer cancel()
	waitFor(t, sc, `"in\n"`)
	if status, _ := call(t, http.MethodPost, url+"/contexts/"+c.ID+"/restart", nil); status != http.StatusOK {
		t.Fatalf("restart: %d", status)
	}
	waitFor(t, sc, "ContextRestarting")
	waitFor(t, sc, lineEnd)
}

// TestKeepalive sends keepalive lines while a cell is silent.
func TestKeepalive(t *testing.T) {
	_, url := newServer(t, func(c *Config) { c.KeepaliveInterval = 20 * time.Millisecond })
	flag := filepath.Join(t.TempDir(), "go")
	sc, cancel := stream(t, url, map[string]any{"code": "import os, time\nwhile not os.path.exists(" + pyString(flag) + "): time.sleep(0.01)\n'released'"})
	defer cancel()
	waitFor(t, sc, lineKeepalive)
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sc, "released")
	waitFor(t, sc, lineEnd)
}

func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// BenchmarkExecute is runCode('1+1') through the handler over loopback HTTP: request, stream of
// number_of_executions, result and end_of_execution, against a warm Python kernel.
// Run: go test ./internal/sandboxd/interpreter/ -run '^$' -bench Execute
func BenchmarkExecute(b *testing.B) {
	_, url := newServer(b)
	body := []byte(`{"code":"1+1"}`)
	client := &http.Client{}
	run := func() {
		resp, err := client.Post(url+"/execute", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Contains(out, []byte(`"text":"2"`)) {
			b.Fatalf("runCode('1+1'): %v %s", err, out)
		}
	}
	run()
	b.ResetTimer()
	for range b.N {
		run()
	}
}

// TestInterruptIgnored kills and restarts a kernel whose cell ignores SIGINT: the context then
// works again, without its state.
func TestInterruptIgnored(t *testing.T) {
	_, url := newServer(t, func(c *Config) { c.InterruptGrace = 100 * time.Millisecond })
	execute(t, url, map[string]any{"code": "lost = 1"})
	sc, cancel := stream(t, url, map[string]any{"code": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('deaf', flush=True)\nwhile True: time.sleep(0.01)"})
	waitFor(t, sc, "deaf")
	cancel()
	if got := mainText(execute(t, url, map[string]any{"code": "1+1"})); got != "2" {
		t.Errorf("after the kill: %q", got)
	}
	if e := errorOf(execute(t, url, map[string]any{"code": "lost"})); e == nil || e["name"] != "NameError" {
		t.Errorf("the killed kernel's state: %v", e)
	}
}
