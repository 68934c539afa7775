package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/sdk"
)

// Bounds of run_code's timeout, in seconds.
const (
	defaultCodeSeconds = 60
	maxCodeSeconds     = 3600
)

// RunCodeInput is run_code's input.
type RunCodeInput struct {
	Sandbox        string `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes; its pool must run the code interpreter (the code-interpreter-v1 template)"`
	Code           string `json:"code" jsonschema:"the code to run; the value of its last expression is the main result"`
	Language       string `json:"language,omitempty" jsonschema:"python (default), javascript (or js) or bash; leave it empty when context is set"`
	Context        string `json:"context,omitempty" jsonschema:"the ID of a context the interpreter made; empty means the language's default context, whose variables, imports and working directory persist between calls"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"interrupt the code after this many seconds (default 60, at most 3600); the context keeps its state"`
}

// CodeResultInfo is one value a run_code call displayed.
type CodeResultInfo struct {
	Text         string   `json:"text,omitempty" jsonschema:"the value as text"`
	IsMainResult bool     `json:"is_main_result" jsonschema:"true for the value of the code's last expression"`
	Formats      []string `json:"formats,omitempty" jsonschema:"the other formats the value has (png, html, chart, ...); PNG images come as image content"`
}

// CodeErrorInfo is the exception a run_code call raised.
type CodeErrorInfo struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// RunCodeOutput is run_code's output.
type RunCodeOutput struct {
	Stdout  string           `json:"stdout" jsonschema:"what the code printed, cut with a '[paddock: ... truncated]' marker past the server's limit"`
	Stderr  string           `json:"stderr" jsonschema:"what the code printed to standard error, cut the same way"`
	Results []CodeResultInfo `json:"results" jsonschema:"the values the code displayed, in order"`
	Error   *CodeErrorInfo   `json:"error,omitempty" jsonschema:"the exception the code raised, if any: a result, not a failure of the tool"`
	Images  int              `json:"images" jsonschema:"how many PNG images (charts) follow as image content"`
	// TimedOut reports whether the code ran past timeout_seconds.
	TimedOut  bool `json:"timed_out" jsonschema:"true when the code ran past timeout_seconds and was interrupted; the context keeps its state"`
	Truncated bool `json:"truncated" jsonschema:"true when stdout, stderr or a result's text was cut"`
}

func (s *Server) addCodeTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "run_code",
		Description: "Run Python, JavaScript or bash code in a sandbox's code interpreter, in a context that keeps its state " +
			"between calls (like a notebook), and return what it printed, its values and its charts. The value of the last " +
			"expression is the main result; matplotlib figures come back as PNG images; an exception is a result with its " +
			"traceback. Needs a sandbox of a pool that runs the code interpreter (the code-interpreter-v1 template).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(true), OpenWorldHint: ptr.To(false)},
	}, s.runCode)
}

func (s *Server) runCode(ctx context.Context, _ *mcp.CallToolRequest, in RunCodeInput) (*mcp.CallToolResult, RunCodeOutput, error) {
	if strings.TrimSpace(in.Code) == "" {
		return nil, RunCodeOutput{}, errors.New("code is empty: pass the code to run, such as 'print(1 + 1)'")
	}
	if in.Language != "" && in.Context != "" {
		return nil, RunCodeOutput{}, errors.New("pass language or context, not both: a context already has its language")
	}
	seconds := in.TimeoutSeconds
	switch {
	case seconds == 0:
		seconds = defaultCodeSeconds
	case seconds < 0 || seconds > maxCodeSeconds:
		return nil, RunCodeOutput{}, fmt.Errorf("timeout_seconds=%d: must be between 1 and %d", seconds, maxCodeSeconds)
	}
	sb, err := s.attach(ctx, in.Sandbox)
	if err != nil {
		return nil, RunCodeOutput{}, err
	}
	interp, err := sb.Interpreter()
	if err != nil {
		return nil, RunCodeOutput{}, err
	}
	ex, err := interp.RunCode(ctx, in.Code, sdk.RunCodeOptions{Language: in.Language, Context: in.Context,
		Timeout: time.Duration(seconds) * time.Second})
	var he *sdk.HTTPError
	timedOut := errors.Is(err, sdk.ErrCodeTimeout)
	switch {
	case timedOut:
	case errors.As(err, &he) && he.StatusCode == http.StatusNotFound:
		return nil, RunCodeOutput{}, fmt.Errorf("the code interpreter of sandbox %q has no context %q; leave context empty for the language's default: %w", in.Sandbox, in.Context, err)
	case err != nil && !errors.As(err, &he):
		return nil, RunCodeOutput{}, fmt.Errorf("sandbox %q did not answer on its code interpreter port; is it from a pool that runs the code interpreter (the code-interpreter-v1 template)? %w", in.Sandbox, err)
	case err != nil:
		return nil, RunCodeOutput{}, err
	}
	return s.codeResult(ex, timedOut, seconds)
}

// codeResult renders an execution for the model: the text of everything in one text block, and
// every PNG as image content after it, so the model sees its charts.
func (s *Server) codeResult(ex *sdk.Execution, timedOut bool, seconds int) (*mcp.CallToolResult, RunCodeOutput, error) {
	stdout, stderr := newCappedBuffer(s.cfg.MaxOutputBytes), newCappedBuffer(s.cfg.MaxOutputBytes)
	_, _ = stdout.Write([]byte(ex.Stdout)) // a cappedBuffer's Write never fails
	_, _ = stderr.Write([]byte(ex.Stderr))
	out := RunCodeOutput{Stdout: stdout.String(), Stderr: stderr.String(), Results: []CodeResultInfo{}, TimedOut: timedOut,
		Truncated: stdout.Truncated() || stderr.Truncated()}
	if timedOut {
		out.Stderr += fmt.Sprintf("\n[paddock: the code ran past timeout_seconds=%d and was interrupted; the context keeps its state]\n", seconds)
	}
	var images []mcp.Content
	var text strings.Builder
	for _, r := range ex.Results {
		value := newCappedBuffer(s.cfg.MaxOutputBytes)
		_, _ = value.Write([]byte(r.Text))
		out.Truncated = out.Truncated || value.Truncated()
		out.Results = append(out.Results, CodeResultInfo{Text: value.String(), IsMainResult: r.IsMainResult, Formats: r.Formats()})
		if r.PNG != "" {
			png, err := base64.StdEncoding.DecodeString(r.PNG)
			if err != nil {
				return nil, RunCodeOutput{}, fmt.Errorf("the code interpreter sent a PNG that is not base64: %w", err)
			}
			images = append(images, &mcp.ImageContent{Data: png, MIMEType: "image/png"})
		}
		label := "display"
		if r.IsMainResult {
			label = "result"
		}
		fmt.Fprintf(&text, "%s: %s\n", label, value.String())
	}
	if ex.Error != nil {
		out.Error = &CodeErrorInfo{Name: ex.Error.Name, Value: ex.Error.Value, Traceback: ex.Error.Traceback}
		fmt.Fprintf(&text, "error: %s: %s\n%s\n", ex.Error.Name, ex.Error.Value, ex.Error.Traceback)
	}
	out.Images = len(images)
	if out.Stdout != "" {
		fmt.Fprintf(&text, "stdout:\n%s\n", out.Stdout)
	}
	if out.Stderr != "" {
		fmt.Fprintf(&text, "stderr:\n%s\n", out.Stderr)
	}
	if text.Len() == 0 {
		text.WriteString("(no output and no value)\n")
	}
	res := &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: strings.TrimRight(text.String(), "\n")}}, images...)}
	return res, out, nil
}
