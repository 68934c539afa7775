// Package mcp drives `paddock mcp`'s tools with the official MCP Go client against a real API
// server with every controller running and a real sandboxd on loopback; the test plays the
// kubelet, reporting every Pod Ready at 127.0.0.1.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/mcp"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env, framework.StartControllers) }

// fixture is one namespace with pools "pool" and "other" (one warm member each), a loopback
// sandboxd and a Paddock MCP server for them.
type fixture struct {
	ns, root string
	srv      *mcp.Server
}

func newFixture(t *testing.T, cfg mcp.Config) *fixture {
	t.Helper()
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	var ls server.Listeners
	var err error
	for _, l := range []*net.Listener{&ls.REST, &ls.GRPC, &ls.Interpreter} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	root := sandboxdtest.ServeInterpreter(t, ls, "")
	env.PlayKubelet(t, ns, "127.0.0.1") // the test's sandboxd listens on loopback
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyAllowed).Obj())
	for _, p := range []string{"pool", "other"} {
		framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool(p, ns, "tpl").Replicas(1).Obj())
	}
	kube, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sdk.NewWithClient(kube, sdk.Options{RESTPort: ls.REST.Addr().(*net.TCPAddr).Port, GRPCPort: ls.GRPC.Addr().(*net.TCPAddr).Port,
		InterpreterPort: ls.Interpreter.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Namespace = ns
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = 1 << 10
	}
	cfg.MaxReadBytes = 1 << 10
	srv, err := mcp.New(cfg, kube, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &fixture{ns: ns, root: root, srv: srv}
}

// connect opens an MCP session to the server over in-memory transports.
func (f *fixture) connect(t *testing.T) *mcpsdk.ClientSession {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	st, ct := mcpsdk.NewInMemoryTransports()
	if _, err := f.srv.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls tool with args and decodes its structured result into out; it returns the tool
// error's text, "" when the call succeeded.
func call(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(framework.Context(t, framework.DefaultTimeout), &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", tool, args, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcpsdk.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return strings.Join(text, "\n")
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decoding %s: %v", tool, b, err)
		}
	}
	return ""
}

// mustCall is call for calls that must succeed.
func mustCall(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	if msg := call(t, cs, tool, args, out); msg != "" {
		t.Fatalf("%s %v: tool error: %s", tool, args, msg)
	}
}

func wantError(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any, wants ...string) {
	t.Helper()
	msg := call(t, cs, tool, args, nil)
	if msg == "" {
		t.Errorf("%s %v succeeded, want a tool error containing %q", tool, args, wants)
		return
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("%s %v: tool error %q, want it to contain %q", tool, args, msg, w)
		}
	}
}

func TestToolsRunCommandsAndMoveFiles(t *testing.T) {
	f := newFixture(t, mcp.Config{Pools: []string{"pool"}, MaxOutputBytes: 16})
	cs := f.connect(t)

	var sb mcp.SandboxInfo
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool", "name": "agent", "env": map[string]string{"GREETING": "hi"}}, &sb)
	if sb.Name != "agent" || sb.Pool != "pool" || sb.State != mcp.StateReady || !sb.InSession {
		t.Errorf("claim_sandbox = %+v, want agent from pool, Ready, in this session", sb)
	}

	var run mcp.RunOutput
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "echo hello"}, &run)
	if diff := cmp.Diff(mcp.RunOutput{Stdout: "hello\n"}, run); diff != "" {
		t.Errorf("run_command echo hello (-want +got):\n%s", diff)
	}
	run = mcp.RunOutput{}
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "echo oops >&2; exit 3"}, &run)
	if diff := cmp.Diff(mcp.RunOutput{Stderr: "oops\n", ExitCode: 3}, run); diff != "" {
		t.Errorf("run_command exit 3 (-want +got):\n%s", diff)
	}
	if err := os.MkdirAll(filepath.Join(f.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	run = mcp.RunOutput{}
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": `echo "$MODE"; basename "$PWD"`, "cwd": "sub", "env": map[string]string{"MODE": "fast"}}, &run)
	if run.Stdout != "fast\nsub\n" {
		t.Errorf("run_command with cwd and env: stdout %q, want %q", run.Stdout, "fast\nsub\n")
	}
	run = mcp.RunOutput{}
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "seq 1 100"}, &run)
	if !run.Truncated || !strings.HasPrefix(run.Stdout, "1\n2\n3\n4\n5\n6\n7\n8") || !strings.Contains(run.Stdout, "[paddock: output truncated: 276 more bytes") {
		t.Errorf("run_command seq 1 100 past a 16-byte limit = %+v, want the first 16 bytes and a truncation marker", run)
	}
	run = mcp.RunOutput{}
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "sleep 60", "timeout_seconds": 1}, &run)
	if !run.TimedOut || run.ExitCode != -1 || !strings.Contains(run.Stderr, "timeout_seconds=1") {
		t.Errorf("run_command past its timeout = %+v, want timed_out, exit code -1 and a note", run)
	}
	wantError(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "pwd", "cwd": "../.."}, "leaves the sandbox root")

	var written mcp.WriteFileOutput
	mustCall(t, cs, "write_file", map[string]any{"sandbox": "agent", "path": "out/hello.txt", "content": "hi there\n"}, &written)
	if written.Size != 9 {
		t.Errorf("write_file size %d, want 9", written.Size)
	}
	if b, err := os.ReadFile(filepath.Join(f.root, "out", "hello.txt")); err != nil || string(b) != "hi there\n" {
		t.Errorf("the file in the sandbox root: %q, %v; want the written content", b, err)
	}
	var read mcp.ReadFileOutput
	mustCall(t, cs, "read_file", map[string]any{"sandbox": "agent", "path": "out/hello.txt"}, &read)
	if diff := cmp.Diff(mcp.ReadFileOutput{Path: "out/hello.txt", Content: "hi there\n", Encoding: mcp.EncodingText, Size: 9}, read); diff != "" {
		t.Errorf("read_file (-want +got):\n%s", diff)
	}
	mustCall(t, cs, "write_file", map[string]any{"sandbox": "agent", "path": "bin.dat", "content": "AP8=", "encoding": "base64", "mode": "0600"}, nil)
	read = mcp.ReadFileOutput{}
	mustCall(t, cs, "read_file", map[string]any{"sandbox": "agent", "path": "bin.dat"}, &read)
	if read.Content != "AP8=" || read.Encoding != mcp.EncodingBase64 {
		t.Errorf("read_file of binary content = %+v, want it base64-encoded", read)
	}
	var stat mcp.StatOutput
	mustCall(t, cs, "stat_file", map[string]any{"sandbox": "agent", "path": "bin.dat"}, &stat)
	if !stat.Exists || stat.Info == nil || stat.Info.Mode != "0600" || stat.Info.Size != 2 || stat.Info.Type != "file" {
		t.Errorf("stat_file bin.dat = %+v, want an existing 2-byte file with mode 0600", stat)
	}
	stat = mcp.StatOutput{}
	mustCall(t, cs, "stat_file", map[string]any{"sandbox": "agent", "path": "missing"}, &stat)
	if stat.Exists || stat.Info != nil {
		t.Errorf("stat_file missing = %+v, want exists=false", stat)
	}
	var list mcp.FileList
	mustCall(t, cs, "list_files", map[string]any{"sandbox": "agent"}, &list)
	var names []string
	for _, e := range list.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if diff := cmp.Diff([]string{"bin.dat:file", "out:directory", "sub:directory"}, names); diff != "" {
		t.Errorf("list_files of the root (-want +got):\n%s", diff)
	}

	// A huge directory is cut at 1000 entries and says so.
	if err := os.MkdirAll(filepath.Join(f.root, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 1001 {
		if err := os.WriteFile(filepath.Join(f.root, "many", fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list = mcp.FileList{}
	mustCall(t, cs, "list_files", map[string]any{"sandbox": "agent", "path": "many"}, &list)
	if len(list.Entries) != 1000 || list.Total != 1001 || !list.Truncated || list.Entries[999].Name != "f0999" {
		t.Errorf("list_files of 1001 files: %d entries, total %d, truncated %v; want the first 1000 of 1001, truncated", len(list.Entries), list.Total, list.Truncated)
	}

	for _, tc := range []struct {
		tool  string
		args  map[string]any
		wants []string
	}{
		{"read_file", map[string]any{"sandbox": "agent", "path": "../../etc/passwd"}, []string{"sandboxd refused", "leaves the sandbox root"}},
		{"write_file", map[string]any{"sandbox": "agent", "path": "../escape.txt", "content": "x"}, []string{"sandboxd refused"}},
		{"read_file", map[string]any{"sandbox": "agent", "path": "nope.txt"}, []string{`"nope.txt" does not exist`, "list_files"}},
		{"claim_sandbox", map[string]any{"pool": "nope"}, []string{`pool "nope" is not one this server may claim from`, "the pools are: pool"}},
		{"claim_sandbox", map[string]any{"pool": "other"}, []string{"the pools are: pool"}},
		{"run_command", map[string]any{"sandbox": "ghost", "command": "true"}, []string{`sandbox "ghost" not found`, "list_sandboxes"}},
		{"write_file", map[string]any{"sandbox": "agent", "path": "x", "content": "!", "encoding": "base64"}, []string{"not valid base64"}},
	} {
		wantError(t, cs, tc.tool, tc.args, tc.wants...)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.root), "escape.txt")); err == nil {
		t.Error("a refused write_file wrote outside the sandbox root")
	}

	// A suspended sandbox is refused at once with what to do; resuming brings it back.
	mustCall(t, cs, "suspend_sandbox", map[string]any{"name": "agent"}, &sb)
	if sb.State != mcp.StateSuspended {
		t.Errorf("suspend_sandbox = %+v, want Suspended", sb)
	}
	wantError(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "true"}, `sandbox "agent" is suspended: call resume_sandbox`)
	mustCall(t, cs, "resume_sandbox", map[string]any{"name": "agent"}, &sb)
	if sb.State != mcp.StateReady {
		t.Errorf("resume_sandbox = %+v, want Ready", sb)
	}
	run = mcp.RunOutput{}
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "agent", "command": "cat out/hello.txt"}, &run)
	if run.Stdout != "hi there\n" {
		t.Errorf("run_command after resume: stdout %q, want the file written before", run.Stdout)
	}

	var del mcp.DeleteOutput
	mustCall(t, cs, "delete_sandbox", map[string]any{"name": "agent"}, &del)
	if !del.Deleted {
		t.Errorf("delete_sandbox = %+v, want deleted", del)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		return claimsGone(ctx, f.ns, "")
	})
}

// run_code runs code in the sandbox's code interpreter with state kept between calls, and returns
// a chart as MCP image content: a PNG that decodes.
func TestRunCodeReturnsTextAndCharts(t *testing.T) {
	f := newFixture(t, mcp.Config{Pools: []string{"pool"}, MaxOutputBytes: 1 << 10})
	cs := f.connect(t)
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool", "name": "analyst"}, nil)

	var out mcp.RunCodeOutput
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "code": "rows = [3, 4]\nprint('kept')"}, &out)
	if out.Stdout != "kept\n" || len(out.Results) != 0 || out.Error != nil {
		t.Errorf("run_code print = %+v; want stdout kept and no value", out)
	}
	out = mcp.RunCodeOutput{}
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "code": "sum(rows) * 6"}, &out)
	if diff := cmp.Diff([]mcp.CodeResultInfo{{Text: "42", IsMainResult: true}}, out.Results); diff != "" {
		t.Errorf("run_code with the state of the call before (-want +got):\n%s", diff)
	}
	out = mcp.RunCodeOutput{}
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "code": "missing_name"}, &out)
	if out.Error == nil || out.Error.Name != "NameError" || !strings.Contains(out.Error.Traceback, "missing_name") {
		t.Errorf("run_code raising = %+v; want a NameError result with its traceback", out)
	}
	out = mcp.RunCodeOutput{}
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "language": "js", "code": "[1, 2].map(x => x * 2)"}, &out)
	if len(out.Results) != 1 || !strings.Contains(out.Results[0].Text, "2, 4") {
		t.Errorf("run_code in javascript = %+v; want [ 2, 4 ]", out)
	}

	// The chart: image content the client decodes as a PNG, after the text.
	res, err := cs.CallTool(framework.Context(t, framework.DefaultTimeout), &mcpsdk.CallToolParams{Name: "run_code", Arguments: map[string]any{
		"sandbox": "analyst", "code": "import matplotlib.pyplot as plt\nplt.figure(figsize=(5, 4), dpi=100)\nplt.plot(rows)\nplt.show()"}})
	if err != nil || res.IsError || len(res.Content) != 2 {
		t.Fatalf("run_code with a chart = %+v, %v; want a text and an image", res, err)
	}
	img, ok := res.Content[1].(*mcpsdk.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("run_code's second content is %T; want a PNG image", res.Content[1])
	}
	decoded, err := png.Decode(bytes.NewReader(img.Data))
	// bbox_inches='tight', as IPython's inline backend: about the 500x400 canvas.
	if err != nil || decoded.Bounds().Dx() < 400 || decoded.Bounds().Dx() > 520 || decoded.Bounds().Dy() < 320 || decoded.Bounds().Dy() > 420 {
		t.Errorf("the chart decodes to %v, %v; want about 500x400", decoded.Bounds(), err)
	}
	if text, ok := res.Content[0].(*mcpsdk.TextContent); !ok || !strings.Contains(text.Text, "<Figure size 500x400 with 1 Axes>") {
		t.Errorf("run_code's text content = %+v; want the figure's text", res.Content[0])
	}

	// A cell past its timeout is interrupted; the context keeps its state.
	out = mcp.RunCodeOutput{}
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "code": "import time\nwhile True:\n    time.sleep(0.05)", "timeout_seconds": 2}, &out)
	if !out.TimedOut || !strings.Contains(out.Stderr, "timeout_seconds=2") {
		t.Errorf("run_code past its timeout = %+v; want timed_out and a note", out)
	}
	out = mcp.RunCodeOutput{}
	mustCall(t, cs, "run_code", map[string]any{"sandbox": "analyst", "code": "rows"}, &out)
	if len(out.Results) != 1 || out.Results[0].Text != "[3, 4]" {
		t.Errorf("run_code after the interrupt = %+v; want the state kept", out)
	}

	for _, tc := range []struct {
		args  map[string]any
		wants []string
	}{
		{map[string]any{"sandbox": "analyst", "code": " "}, []string{"code is empty"}},
		{map[string]any{"sandbox": "analyst", "code": "1", "language": "python", "context": "c"}, []string{"not both"}},
		{map[string]any{"sandbox": "analyst", "code": "1", "context": "no-such-context"}, []string{`no context "no-such-context"`}},
		{map[string]any{"sandbox": "analyst", "code": "1", "timeout_seconds": 4000}, []string{"timeout_seconds=4000"}},
		{map[string]any{"sandbox": "ghost", "code": "1"}, []string{`sandbox "ghost" not found`}},
	} {
		wantError(t, cs, "run_code", tc.args, tc.wants...)
	}
}

func TestListsAndResourcesAreScoped(t *testing.T) {
	f := newFixture(t, mcp.Config{Pools: []string{"pool"}})
	ctx := framework.Context(t, framework.DefaultTimeout)
	// A claim of another pool and one nobody's session made: the first is never shown.
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("foreign", f.ns, "other").Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("neighbour", f.ns, "pool").Obj())
	cs := f.connect(t)

	var pools mcp.PoolList
	mustCall(t, cs, "list_pools", nil, &pools)
	if len(pools.Pools) != 1 || pools.Pools[0].Name != "pool" || pools.Pools[0].Template != "tpl" || pools.Pools[0].Replicas != 1 {
		t.Errorf("list_pools = %+v, want only pool (template tpl, 1 replica)", pools)
	}
	var mine mcp.SandboxList
	mustCall(t, cs, "list_sandboxes", nil, &mine)
	if len(mine.Sandboxes) != 0 {
		t.Errorf("list_sandboxes before claiming = %+v, want none", mine)
	}
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool"}, nil)
	mustCall(t, cs, "list_sandboxes", nil, &mine)
	if len(mine.Sandboxes) != 1 || !strings.HasPrefix(mine.Sandboxes[0].Name, "pool-") || !mine.Sandboxes[0].InSession {
		t.Errorf("list_sandboxes = %+v, want the one claimed sandbox, named after its pool", mine)
	}
	var all mcp.SandboxList
	mustCall(t, cs, "list_sandboxes", map[string]any{"all": true}, &all)
	var names []string
	for _, s := range all.Sandboxes {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"neighbour", mine.Sandboxes[0].Name}, names); diff != "" {
		t.Errorf("list_sandboxes all=true (-want +got):\n%s", diff)
	}
	wantError(t, cs, "get_sandbox", map[string]any{"name": "foreign"}, `comes from pool "other"`)

	for uri, want := range map[string]int{mcp.SessionSandboxesURI: 1, mcp.NamespaceSandboxesURI: 2} {
		res, err := cs.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		var got mcp.SandboxList
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &got); err != nil || len(got.Sandboxes) != want {
			t.Errorf("resource %s = %s (%v), want %d sandboxes", uri, res.Contents[0].Text, err, want)
		}
	}
}

func TestSessionEndDeletesItsSandboxes(t *testing.T) {
	f := newFixture(t, mcp.Config{})
	cs := f.connect(t)
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool", "name": "a"}, nil)
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "other", "name": "b"}, nil)
	other := f.connect(t)
	mustCall(t, other, "claim_sandbox", map[string]any{"pool": "pool", "name": "c"}, nil)

	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error { return claimsGone(ctx, f.ns, "c") })
	// The other session's sandbox stays until that session ends too.
	if _, err := getClaim(t, f.ns, "c"); err != nil {
		t.Errorf("the other session's claim: %v, want it kept", err)
	}
}

func TestKeepSandboxesKeepsThemAfterTheSession(t *testing.T) {
	f := newFixture(t, mcp.Config{KeepSandboxes: true})
	cs := f.connect(t)
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool", "name": "kept"}, nil)
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Shutdown(framework.Context(t, framework.DefaultTimeout)); err != nil {
		t.Fatal(err)
	}
	claim, err := getClaim(t, f.ns, "kept")
	if err != nil || claim.DeletionTimestamp != nil {
		t.Errorf("claim after the session ended with KeepSandboxes: %v (deleting: %v), want it kept", err, claim.DeletionTimestamp != nil)
	}
}

func TestHTTPNeedsTheBearerToken(t *testing.T) {
	f := newFixture(t, mcp.Config{})
	hs := httptest.NewServer(f.srv.HTTPHandler("s3cret", time.Minute))
	t.Cleanup(hs.Close)
	ctx := framework.Context(t, framework.DefaultTimeout)

	for _, auth := range []string{"", "Bearer wrong", "s3cret"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+mcp.HTTPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s with Authorization %q: HTTP %d, want 401", mcp.HTTPPath, auth, resp.StatusCode)
		}
	}

	transport := &mcpsdk.StreamableClientTransport{Endpoint: hs.URL + mcp.HTTPPath,
		HTTPClient: &http.Client{Transport: bearer{"s3cret", http.DefaultTransport}}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connecting with the token: %v", err)
	}
	mustCall(t, cs, "claim_sandbox", map[string]any{"pool": "pool", "name": "remote"}, nil)
	var run mcp.RunOutput
	mustCall(t, cs, "run_command", map[string]any{"sandbox": "remote", "command": "echo over http"}, &run)
	if run.Stdout != "over http\n" {
		t.Errorf("run_command over HTTP: stdout %q", run.Stdout)
	}
	// Closing the client deletes the HTTP session, which ends it.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error { return claimsGone(ctx, f.ns, "") })
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
