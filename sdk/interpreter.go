package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
)

// ErrCodeTimeout matches the error of a RunCode that ran past RunCodeOptions.Timeout: the
// connection was closed, the interpreter interrupted the cell, and the context kept its state.
var ErrCodeTimeout = errors.New("the code ran past its timeout and was interrupted")

// maxCodeLine bounds one line of the interpreter's answer: a result carries its PNG or HTML
// inline, so a line is as large as the biggest chart or table a cell displays.
const maxCodeLine = 64 << 20

// Interpreter runs code in a sandbox's code interpreter: sandboxd's --interpreter-port (49999 in
// the code-interpreter template), which speaks the protocol of E2B's code interpreter. Code runs
// in contexts, each a kernel that keeps its state between calls: python (the default),
// javascript and bash.
type Interpreter struct {
	rt *Runtime
}

// NewInterpreter returns an Interpreter for the code interpreter at e.URL, e.g.
// http://198.18.0.5:49999, or for the router at e.URL when e.Sandbox is set (e.Port, default
// 49999, is then sent as X-Sandbox-Port).
func NewInterpreter(e Endpoint) (*Interpreter, error) {
	rt, err := newRuntime(e, sandboxd.InterpreterPort)
	if err != nil {
		return nil, err
	}
	return &Interpreter{rt: rt}, nil
}

// Interpreter returns the sandbox's code interpreter: through the router when Options.RouterURL
// is set, else straight to the first pod IP on Options.InterpreterPort. The sandbox's template
// must start sandboxd with --interpreter-port=49999 and declare the port (the code-interpreter
// template does).
func (s *Sandbox) Interpreter() (*Interpreter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.endpoint(s.c.opts.InterpreterPort)
	if err != nil {
		return nil, err
	}
	return NewInterpreter(e)
}

// RunCodeOptions tune one RunCode call.
type RunCodeOptions struct {
	// Language is python (the default), javascript (or js) or bash; it selects that language's
	// default context. Leave it empty when Context is set.
	Language string
	// Context is the ID of a context the interpreter made; empty means the language's default.
	Context string
	// Env holds environment variables for this call only.
	Env map[string]string
	// Timeout bounds the call; past it the connection closes, the interpreter interrupts the
	// cell and RunCode returns what came so far with an error matching ErrCodeTimeout. Zero means
	// no limit but ctx's.
	Timeout time.Duration
}

// Execution is what a cell produced.
type Execution struct {
	// Results are the cell's displayed values in order; the last expression's value has
	// IsMainResult.
	Results []CodeResult
	// Stdout and Stderr are what the cell printed.
	Stdout, Stderr string
	// Error is the exception the cell raised (a result, not a failure of RunCode).
	Error *CodeError
	// ExecutionCount counts the cells the context has run.
	ExecutionCount int
}

// Text is the main result's text, or "" when the cell has no value.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// CodeResult is one displayed value in every format its object offers. Images (PNG, JPEG) are
// base64, as on the wire.
type CodeResult struct {
	IsMainResult bool   `json:"is_main_result"`
	Text         string `json:"text,omitempty"`
	HTML         string `json:"html,omitempty"`
	Markdown     string `json:"markdown,omitempty"`
	SVG          string `json:"svg,omitempty"`
	PNG          string `json:"png,omitempty"`
	JPEG         string `json:"jpeg,omitempty"`
	PDF          string `json:"pdf,omitempty"`
	LaTeX        string `json:"latex,omitempty"`
	JavaScript   string `json:"javascript,omitempty"`
	// JSON, Data (a pandas DataFrame's columns) and Chart (a matplotlib figure's description)
	// are JSON objects.
	JSON  json.RawMessage `json:"json,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	Chart json.RawMessage `json:"chart,omitempty"`
	// Extra holds the formats of other MIME types, by type.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Formats lists the formats the result carries besides text, in a fixed order.
func (r CodeResult) Formats() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"html", r.HTML != ""}, {"markdown", r.Markdown != ""}, {"svg", r.SVG != ""}, {"png", r.PNG != ""},
		{"jpeg", r.JPEG != ""}, {"pdf", r.PDF != ""}, {"latex", r.LaTeX != ""}, {"javascript", r.JavaScript != ""},
		{"json", len(r.JSON) > 0}, {"data", len(r.Data) > 0}, {"chart", len(r.Chart) > 0}} {
		if f.set {
			out = append(out, f.name)
		}
	}
	for k := range r.Extra {
		out = append(out, k)
	}
	return out
}

// CodeError is an exception a cell raised.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func (e *CodeError) Error() string { return e.Name + ": " + e.Value }

// codeLine is one line of POST /execute's answer.
type codeLine struct {
	CodeResult
	Type           string `json:"type"`
	Text           string `json:"text"`
	Name           string `json:"name"`
	Value          string `json:"value"`
	Traceback      string `json:"traceback"`
	ExecutionCount int    `json:"execution_count"`
}

// RunCode runs code in a context of the interpreter and returns what it produced once the cell
// ends. An exception in the code is Execution.Error, not an error; errors are the interpreter's
// (an unknown context, a language it does not serve) or the connection's. A call is never
// retried: the code may have run.
func (i *Interpreter) RunCode(ctx context.Context, code string, o RunCodeOptions) (*Execution, error) {
	body, err := json.Marshal(map[string]any{"code": code, "language": nullable(o.Language),
		"context_id": nullable(o.Context), "env_vars": o.Env})
	if err != nil {
		return nil, err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	ex := &Execution{}
	err = i.rt.do(ctx, "run code", false, http.MethodPost, "execute", "application/json", body, func(resp *http.Response) error {
		return readExecution(resp.Body, ex)
	})
	if err != nil && o.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ex, fmt.Errorf("run code: %w after %s", ErrCodeTimeout, o.Timeout)
	}
	if err != nil {
		return ex, err
	}
	return ex, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// readExecution reads POST /execute's JSON lines into ex until end_of_execution.
func readExecution(body io.Reader, ex *Execution) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var stdout, stderr strings.Builder
	defer func() { ex.Stdout, ex.Stderr = stdout.String(), stderr.String() }()
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("the interpreter's answer ended before end_of_execution: the sandbox or its kernel went away")
			}
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l codeLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("the interpreter sent a line that is not JSON (%w): %.200q", err, line)
		}
		switch l.Type {
		case "stdout":
			stdout.WriteString(l.Text)
		case "stderr":
			stderr.WriteString(l.Text)
		case "result":
			r := l.CodeResult
			r.Text = l.Text
			ex.Results = append(ex.Results, r)
		case "error":
			ex.Error = &CodeError{Name: l.Name, Value: l.Value, Traceback: l.Traceback}
		case "number_of_executions":
			ex.ExecutionCount = l.ExecutionCount
		case "end_of_execution":
			return nil
		}
	}
}

// readLine reads one line of at most maxCodeLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxCodeLine {
			return nil, fmt.Errorf("the interpreter sent a line of more than %d MiB", maxCodeLine>>20)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err != nil && len(line) > 0 && errors.Is(err, io.EOF) {
				return line, nil
			}
			return line, err
		}
	}
}
