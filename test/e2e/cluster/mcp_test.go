package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// mcpClientDir holds the official MCP TypeScript client, pinned by its package-lock.json.
var mcpClientDir = filepath.Join(framework.RepoRoot(), "test", "e2e", "cluster", "testdata", "mcpclient")

// mcpReport is what testdata/mcpclient/client.mjs prints.
type mcpReport struct {
	Server struct{ Name string }
	Tools  []struct {
		Name         string
		Description  string
		InputSchema  mcpSchema `json:"inputSchema"`
		OutputSchema mcpSchema `json:"outputSchema"`
	}
	Results []struct {
		Tool       string
		IsError    bool `json:"isError"`
		Text       string
		Structured map[string]any
		Images     []struct {
			MIMEType string `json:"mimeType"`
			Data     string
		}
	}
}

type mcpSchema struct {
	Type       string
	Required   []string
	Properties map[string]any
}

type mcpStep struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// testMCP runs `paddock mcp` as an agent runtime would, driven by the official TypeScript client
// over stdio and over streamable HTTP, against sandboxd on the real node.
func testMCP(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	applyExample(t, ctx, c, ns, "sandboxd-template.yaml")
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("sandboxd", ns, "sandboxd").Replicas(1).Obj())
	framework.NodePackage(t, mcpClientDir)
	bin := paddockBinary(t)
	base := []string{"--kubeconfig", suite.kubeconfig, "-n", ns, "mcp", "--pools", "sandboxd"}

	t.Run("stdio", func(t *testing.T) {
		report := runMCPClient(t, ctx, mcpSteps("stdio"), nil, append([]string{"stdio", bin}, base...)...)
		checkMCPReport(t, report, "stdio")
		checkSessionGone(t, c, ns)
	})
	t.Run("streamable HTTP with a bearer token", func(t *testing.T) {
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("e2e-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		url := startMCPServer(t, ctx, bin, append(base, "--listen", "127.0.0.1:0", "--token-file", token)...)
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without a token: HTTP %d, want 401", url, resp.StatusCode)
		}
		report := runMCPClient(t, ctx, mcpSteps("http"), []string{"MCP_TOKEN=e2e-token"}, "http", url)
		checkMCPReport(t, report, "http")
		checkSessionGone(t, c, ns)
	})
	t.Run("run_code in a code-interpreter sandbox, charts as images", func(t *testing.T) {
		testMCPRunCode(t, ctx, c, ns, bin)
	})
}

// testMCPRunCode claims a sandbox of paddock dev up's code-interpreter template (copied into ns)
// through `paddock mcp` over stdio and runs code in it with run_code: state kept between calls,
// an exception as a result, and a matplotlib chart that arrives as image content and decodes as
// a PNG of about the figure's size.
func testMCPRunCode(t *testing.T, ctx context.Context, c client.Client, ns, bin string) {
	copyDevTemplate(t, ctx, c, e2b.InterpreterTemplate, ns, "interpreter", false)
	framework.MustCreate(t, ctx, c, poolOf(ns, "interpreter", 1))
	waitPoolReady(t, c, ns, "interpreter", 1)
	steps := []mcpStep{
		{"claim_sandbox", map[string]any{"pool": "interpreter", "name": "analyst", "timeout_seconds": 300}},
		{"run_code", map[string]any{"sandbox": "analyst", "code": "import pandas as pd\ndf = pd.DataFrame({'v': [2, 3, 7]})"}},
		{"run_code", map[string]any{"sandbox": "analyst", "code": "int(df.v.prod())"}},
		{"run_code", map[string]any{"sandbox": "analyst", "code": "df.nope"}},
		{"run_code", map[string]any{"sandbox": "analyst", "code": "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.bar(['a', 'b', 'c'], df.v)\nplt.show()"}},
	}
	r := runMCPClient(t, ctx, steps, nil, append([]string{"stdio", bin}, "--kubeconfig", suite.kubeconfig, "-n", ns, "mcp", "--pools", "interpreter")...)
	if len(r.Results) != len(steps) {
		t.Fatalf("%d results, want %d: %+v", len(r.Results), len(steps), r.Results)
	}
	for i, res := range r.Results {
		if res.IsError {
			t.Fatalf("step %d (%s): tool error %q", i, res.Tool, res.Text)
		}
	}
	if got := fmt.Sprint(r.Results[2].Structured["results"]); !strings.Contains(got, "text:42") || !strings.Contains(r.Results[2].Text, "result: 42") {
		t.Errorf("run_code with the state of the call before = %s / %q; want the value 42", got, r.Results[2].Text)
	}
	if e, _ := r.Results[3].Structured["error"].(map[string]any); e["name"] != "AttributeError" {
		t.Errorf("run_code raising = %v; want an AttributeError result", r.Results[3].Structured)
	}
	chart := r.Results[4]
	if len(chart.Images) != 1 || chart.Images[0].MIMEType != "image/png" || chart.Structured["images"] != 1.0 {
		t.Fatalf("run_code with a chart: images %d, structured %v; want one PNG", len(chart.Images), chart.Structured)
	}
	data, err := base64.StdEncoding.DecodeString(chart.Images[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	// bbox_inches='tight' (as IPython's inline backend) cuts the 400x300 canvas to what is drawn.
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil || img.Bounds().Dx() < 320 || img.Bounds().Dx() > 420 || img.Bounds().Dy() < 240 || img.Bounds().Dy() > 320 {
		t.Errorf("the chart: %v; want a PNG of about 400x300", err)
	}
	checkSessionGone(t, c, ns)
}

// mcpSteps is the scenario: claim, echo, write and read a file, exit 3, a path escape, an
// unknown pool, delete, and a second sandbox left for the session's end to remove.
func mcpSteps(suffix string) []mcpStep {
	name := "mcp-" + suffix
	return []mcpStep{
		{"claim_sandbox", map[string]any{"pool": "sandboxd", "name": name, "timeout_seconds": 300}},
		{"run_command", map[string]any{"sandbox": name, "command": "echo hello"}},
		{"write_file", map[string]any{"sandbox": name, "path": "notes/hello.txt", "content": "hi from mcp\n"}},
		{"read_file", map[string]any{"sandbox": name, "path": "notes/hello.txt"}},
		{"run_command", map[string]any{"sandbox": name, "command": "cat notes/hello.txt; exit 3", "env": map[string]any{"X": "1"}}},
		{"read_file", map[string]any{"sandbox": name, "path": "../../etc/passwd"}},
		{"claim_sandbox", map[string]any{"pool": "no-such-pool"}},
		{"delete_sandbox", map[string]any{"name": name}},
		{"claim_sandbox", map[string]any{"pool": "sandboxd", "name": name + "-left", "timeout_seconds": 300}},
	}
}

func runMCPClient(t *testing.T, ctx context.Context, steps []mcpStep, env []string, args ...string) *mcpReport {
	t.Helper()
	in, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", append([]string{"client.mjs"}, args...)...)
	node.Dir = mcpClientDir
	node.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	node.Stdin, node.Stdout, node.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := node.Run(); err != nil {
		t.Fatalf("node client.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("client.mjs %s, stderr:\n%s", args[0], stderr.String())
	report := &mcpReport{}
	if err := json.Unmarshal(stdout.Bytes(), report); err != nil {
		t.Fatalf("decoding the client's report: %v\n%s", err, stdout.String())
	}
	return report
}

func checkMCPReport(t *testing.T, r *mcpReport, suffix string) {
	t.Helper()
	if r.Server.Name != "paddock" {
		t.Errorf("server name %q, want paddock", r.Server.Name)
	}
	var names []string
	required := map[string][]string{}
	for _, tool := range r.Tools {
		names = append(names, tool.Name)
		required[tool.Name] = tool.InputSchema.Required
		if tool.Description == "" || tool.InputSchema.Type != "object" || tool.OutputSchema.Type != "object" {
			t.Errorf("tool %s: description %q, input schema type %q, output schema type %q; want a description and object schemas",
				tool.Name, tool.Description, tool.InputSchema.Type, tool.OutputSchema.Type)
		}
		if tool.Name == "run_command" {
			for _, p := range []string{"stdout", "stderr", "exit_code", "timed_out", "truncated"} {
				if _, ok := tool.OutputSchema.Properties[p]; !ok {
					t.Errorf("run_command's output schema lacks %s: %v", p, tool.OutputSchema.Properties)
				}
			}
		}
	}
	slices.Sort(names)
	want := []string{"claim_sandbox", "delete_sandbox", "get_sandbox", "list_files", "list_pools", "list_sandboxes",
		"read_file", "resume_sandbox", "run_code", "run_command", "stat_file", "suspend_sandbox", "write_file"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"sandbox", "command"}, required["run_command"]); diff != "" {
		t.Errorf("run_command's required inputs (-want +got):\n%s", diff)
	}

	if len(r.Results) != 9 {
		t.Fatalf("%d results, want one per step: %+v", len(r.Results), r.Results)
	}
	ok := func(i int) map[string]any {
		t.Helper()
		if r.Results[i].IsError {
			t.Errorf("step %d (%s): tool error %q", i, r.Results[i].Tool, r.Results[i].Text)
		}
		return r.Results[i].Structured
	}
	failed := func(i int, wants ...string) {
		t.Helper()
		if !r.Results[i].IsError {
			t.Errorf("step %d (%s) succeeded with %v, want a tool error", i, r.Results[i].Tool, r.Results[i].Structured)
		}
		for _, w := range wants {
			if !strings.Contains(r.Results[i].Text, w) {
				t.Errorf("step %d (%s): error %q, want it to contain %q", i, r.Results[i].Tool, r.Results[i].Text, w)
			}
		}
	}
	if got := ok(0); got["name"] != "mcp-"+suffix || got["state"] != "Ready" || got["in_session"] != true {
		t.Errorf("claim_sandbox = %v, want mcp-%s Ready in this session", got, suffix)
	}
	if got := ok(1); got["stdout"] != "hello\n" || got["exit_code"] != 0.0 {
		t.Errorf("echo hello = %v, want stdout hello and exit code 0", got)
	}
	if got := ok(2); got["size"] != 12.0 {
		t.Errorf("write_file = %v, want 12 bytes written", got)
	}
	if got := ok(3); got["content"] != "hi from mcp\n" || got["encoding"] != "text" {
		t.Errorf("read_file = %v, want the written text", got)
	}
	if got := ok(4); got["stdout"] != "hi from mcp\n" || got["exit_code"] != 3.0 {
		t.Errorf("exit 3 = %v, want the file's text and exit code 3", got)
	}
	failed(5, "sandboxd refused", "leaves the sandbox root")
	failed(6, `pool "no-such-pool" is not one this server may claim from`, "the pools are: sandboxd")
	if got := ok(7); got["deleted"] != true {
		t.Errorf("delete_sandbox = %v, want deleted", got)
	}
	ok(8)
}

// checkSessionGone waits until no claim of an MCP session is left in ns: the client closed its
// session, so the server deleted what the session still held.
func checkSessionGone(t *testing.T, c client.Client, ns string) {
	t.Helper()
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		list := &extensionsv1beta1.SandboxClaimList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{extensionsv1beta1.MCPSessionLabel}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d claims of MCP sessions left, e.g. %s", len(list.Items), list.Items[0].Name)
		}
		return nil
	})
}

var mcpURL = regexp.MustCompile(`url=(http://\S+)`)

// startMCPServer runs `paddock args...` with --listen until the test ends and returns the URL
// it logged. At the end it is stopped with SIGTERM, as a service manager would, and must exit 0.
func startMCPServer(t *testing.T, ctx context.Context, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	urls := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := mcpURL.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		<-copied
		t.Logf("paddock mcp --listen log:\n%s", log.String())
		if err != nil {
			t.Errorf("paddock mcp --listen after SIGINT: %v", err)
		}
	})
	select {
	case u := <-urls:
		return u
	case <-copied:
		t.Fatalf("paddock mcp --listen exited before serving:\n%s", log.String())
	case <-ctx.Done():
		t.Fatalf("paddock mcp --listen logged no URL: %v", ctx.Err())
	}
	return ""
}
