package interpreter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPython runs cells through the Python driver and checks the wire lines they give.
func TestPython(t *testing.T) {
	_, url := newServer(t)
	run := func(code string) []line { return execute(t, url, map[string]any{"code": code}) }

	lines := run("x = 40\nx + 2")
	if got := mainText(lines); got != "42" {
		t.Fatalf("main result %q, want 42; lines %v", got, lines)
	}
	if lines[0]["type"] != lineExecutions {
		t.Errorf("first line %v, want number_of_executions", lines[0])
	}
	if got := mainText(run("x")); got != "40" {
		t.Errorf("state: x is %q in the next cell, want 40", got)
	}
	if got := mainText(run("'abc'")); got != "abc" {
		t.Errorf("a str result is %q, want abc (outer quotes stripped)", got)
	}
	lines = run("import os, sys\nprint('hé ✓')\nprint('to err', file=sys.stderr)\nos.system('echo from-a-child')\nNone")
	if got := stdout(lines, lineStdout); got != "hé ✓\nfrom-a-child\n" {
		t.Errorf("stdout %q", got)
	}
	if got := stdout(lines, lineStderr); got != "to err\n" {
		t.Errorf("stderr %q", got)
	}
	for _, l := range ofType(lines, lineStdout) {
		if ts, _ := l["timestamp"].(string); !strings.HasSuffix(ts, "+00:00") {
			t.Errorf("stdout line without an ISO timestamp: %v", l)
		}
	}
	if len(ofType(lines, lineResult)) != 0 {
		t.Errorf("a cell ending in None has results: %v", lines)
	}
	e := errorOf(run("def f():\n    return 1/0\nf()"))
	if e == nil || e["name"] != "ZeroDivisionError" || e["value"] != "division by zero" {
		t.Fatalf("error %v, want ZeroDivisionError", e)
	}
	if tb := e["traceback"].(string); !strings.Contains(tb, "return 1/0") || strings.Contains(tb, "paddock") || strings.Contains(tb, "<string>") {
		t.Errorf("traceback shows the cell's line and no driver frame:\n%s", tb)
	}
	if e := errorOf(run("def (")); e == nil || e["name"] != "SyntaxError" {
		t.Errorf("syntax error %v", e)
	}
	if got := mainText(run("import asyncio\nawait asyncio.sleep(0)\n'awaited'")); got != "awaited" {
		t.Errorf("top-level await gave %q", got)
	}
	lines = run("class R:\n    def _repr_html_(self): return '<b>r</b>'\n    def _repr_markdown_(self): return '*r*'\n    def _repr_latex_(self): return '$r$'\n    def _repr_json_(self): return {'a': [1, 2]}\n    def _repr_svg_(self): return '<svg/>'\ndisplay(R(), 1)\nR()")
	results := ofType(lines, lineResult)
	if len(results) != 3 {
		t.Fatalf("display(R(), 1) then R() gave %d results: %v", len(results), results)
	}
	if results[0]["html"] != "<b>r</b>" || results[0]["markdown"] != "*r*" || results[0]["latex"] != "$r$" || results[0]["svg"] != "<svg/>" || results[0]["is_main_result"] != false {
		t.Errorf("rich display %v", results[0])
	}
	if j, ok := results[0]["json"].(map[string]any); !ok || len(j["a"].([]any)) != 2 {
		t.Errorf("json is not an object: %v", results[0]["json"])
	}
	if results[1]["text"] != "1" || results[2]["is_main_result"] != true {
		t.Errorf("results %v", results)
	}
	for _, r := range results {
		if _, ok := r["extra"].(map[string]any); !ok {
			t.Errorf("result without extra: %v", r)
		}
	}
}

// TestPythonEnv checks that env_vars apply to their cell only and that the kernel has the
// sandbox's environment.
func TestPythonEnv(t *testing.T) {
	_, url := newServer(t)
	lines := execute(t, url, map[string]any{"code": "import os, subprocess\nprint(subprocess.run(['sh', '-c', 'echo $PER_CALL'], capture_output=True, text=True).stdout, end='')\nos.environ['PER_CALL']", "env_vars": map[string]string{"PER_CALL": "v1"}})
	if mainText(lines) != "v1" || stdout(lines, lineStdout) != "v1\n" {
		t.Fatalf("per-call env: %v", lines)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "import os\nrepr(os.environ.get('PER_CALL')) + os.environ['SANDBOX_VISIBLE']"})); got != "Noneyes" {
		t.Errorf("after the call: %q, want Noneyes (restored, sandbox env kept)", got)
	}
}

// TestJavaScript runs cells in the Node kernel.
func TestJavaScript(t *testing.T) {
	_, url := newServer(t)
	run := func(code string) []line { return execute(t, url, map[string]any{"code": code, "language": "js"}) }
	if got := mainText(run("const a = 20\nlet b = await Promise.resolve(22)\na + b")); got != "42" {
		t.Fatalf("top-level await and last value: %q", got)
	}
	lines := run("console.log('hé', a); process.stdout.write('direct\\n'); console.error('e'); 'str'")
	if mainText(lines) != "str" || stdout(lines, lineStdout) != "hé 20\ndirect\n" || stdout(lines, lineStderr) != "e\n" {
		t.Errorf("output: %v", lines)
	}
	if e := errorOf(run("missing()")); e == nil || e["name"] != "ReferenceError" || strings.Contains(e["traceback"].(string), "node:repl") {
		t.Errorf("error %v", e)
	}
	if got := mainText(execute(t, url, map[string]any{"code": "process.env.JS_VAR", "language": "javascript", "env_vars": map[string]string{"JS_VAR": "j"}})); got != "j" {
		t.Errorf("env var: %q", got)
	}
	if got := mainText(run("String(process.env.JS_VAR)")); got != "undefined" {
		t.Errorf("env var after its call: %q", got)
	}
}

// TestBash runs cells in the bash kernel.
func TestBash(t *testing.T) {
	_, url := newServer(t)
	run := func(code string, env map[string]string) []line {
		return execute(t, url, map[string]any{"code": code, "language": "bash", "env_vars": env})
	}
	run("mkdir -p sub && cd sub && V=kept", nil)
	lines := run("basename \"$PWD\"; echo $V $ONLY; echo oops >&2", map[string]string{"ONLY": "it's"})
	if got := stdout(lines, lineStdout); got != "sub\nkept it's\n" {
		t.Errorf("stdout %q", got)
	}
	if got := stdout(lines, lineStderr); got != "oops\n" {
		t.Errorf("stderr %q", got)
	}
	if got := stdout(run("echo \"[$ONLY]\"", nil), lineStdout); got != "[]\n" {
		t.Errorf("env after its call: %q", got)
	}
	if e := errorOf(run("false", nil)); e == nil || e["value"] != "1" {
		t.Errorf("a failing cell: %v", e)
	}
}

// TestUnsupportedLanguage answers the cell with an error line naming the served languages.
func TestUnsupportedLanguage(t *testing.T) {
	_, url := newServer(t)
	e := errorOf(execute(t, url, map[string]any{"code": "1", "language": "r"}))
	if e == nil || e["name"] != "UnsupportedLanguage" || !strings.Contains(e["value"].(string), "python, javascript (js) or bash") {
		t.Fatalf("error %v", e)
	}
}

// TestPythonShellAndMagics runs IPython's !command and %cd lines, and streams a partial line.
func TestPythonShellAndMagics(t *testing.T) {
	_, url := newServer(t)
	lines := execute(t, url, map[string]any{"code": "import os\nos.makedirs('d', exist_ok=True)\n%cd d\n!echo shell-out; echo shell-err >&2\nos.path.basename(os.getcwd())"})
	if got := mainText(lines); got != "d" {
		t.Errorf("%%cd: cwd %q, lines %v", got, lines)
	}
	if got := stdout(lines, lineStdout); !strings.Contains(got, "shell-out\nshell-err\n") {
		t.Errorf("!command output %q", got)
	}
	if e := errorOf(execute(t, url, map[string]any{"code": "%timeit 1"})); e == nil || !strings.Contains(e["value"].(string), "%timeit is not supported") {
		t.Errorf("unsupported magic: %v", e)
	}
	flag := filepath.Join(t.TempDir(), "seen")
	sc, cancel := stream(t, url, map[string]any{"code": "import os, time\nprint('partial', end='')\nwhile not os.path.exists(" + pyString(flag) + "): time.sleep(0.01)"})
	defer cancel()
	waitFor(t, sc, `"partial"`)
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sc, lineEnd)
}
