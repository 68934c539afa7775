package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/sdk"
)

// Bounds of run_command's timeout, in seconds.
const (
	defaultCommandSeconds = 60
	maxCommandSeconds     = 3600
)

// maxListEntries caps list_files, so a huge directory cannot fill the model's context.
const maxListEntries = 1000

// attachTimeout bounds waiting for a Pending sandbox before a command or file call.
const attachTimeout = 2 * time.Minute

// File content encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// RunInput is run_command's input.
type RunInput struct {
	Sandbox        string            `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes"`
	Command        string            `json:"command" jsonschema:"a shell command line, run with /bin/sh -c, so pipes, redirections and && work"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory, relative to the sandbox root (default: the root)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default 60, at most 3600)"`
}

// RunOutput is run_command's output.
type RunOutput struct {
	Stdout   string `json:"stdout" jsonschema:"standard output, cut with a '[paddock: ... truncated]' marker past the server's limit"`
	Stderr   string `json:"stderr" jsonschema:"standard error, cut the same way"`
	ExitCode int    `json:"exit_code" jsonschema:"the command's exit code; -1 when it was killed (timed_out) or died of a signal"`
	TimedOut bool   `json:"timed_out" jsonschema:"true when the command ran past timeout_seconds and was killed"`
	// Truncated reports whether either stream was cut.
	Truncated bool `json:"truncated" jsonschema:"true when stdout or stderr was cut; redirect big output to a file and read parts of it"`
}

// PathInput names a path in a sandbox.
type PathInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes"`
	Path    string `json:"path" jsonschema:"a path relative to the sandbox root, such as src/main.py; it may not leave the root"`
}

// ListFilesInput is list_files' input.
type ListFilesInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes"`
	Path    string `json:"path,omitempty" jsonschema:"the directory, relative to the sandbox root (default: the root)"`
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	Sandbox  string `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes"`
	Path     string `json:"path" jsonschema:"the file to write, relative to the sandbox root; missing directories are created, an existing file is replaced"`
	Content  string `json:"content" jsonschema:"the file's content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default) or base64 for binary content"`
	Mode     string `json:"mode,omitempty" jsonschema:"permission bits in octal, such as 0755 for a script (default 0644)"`
}

// WriteFileOutput is write_file's output.
type WriteFileOutput struct {
	Path string `json:"path"`
	Size int    `json:"size" jsonschema:"bytes written"`
}

// ReadFileInput is read_file's input.
type ReadFileInput struct {
	Sandbox  string `json:"sandbox" jsonschema:"the sandbox's name, from claim_sandbox or list_sandboxes"`
	Path     string `json:"path" jsonschema:"the file to read, relative to the sandbox root"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text or base64; by default text for UTF-8 content and base64 otherwise"`
}

// ReadFileOutput is read_file's output.
type ReadFileOutput struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding" jsonschema:"text or base64: how content is encoded"`
	Size      int64  `json:"size" jsonschema:"the file's full size in bytes"`
	Truncated bool   `json:"truncated" jsonschema:"true when only the first part of the file is in content (past the server's limit); read the rest with run_command, e.g. tail -c"`
}

// FileInfo describes one file or directory.
type FileInfo struct {
	Name       string `json:"name"`
	Type       string `json:"type" jsonschema:"file or directory"`
	Size       int64  `json:"size" jsonschema:"bytes (0 for directories)"`
	Mode       string `json:"mode" jsonschema:"permission bits in octal"`
	ModifiedAt string `json:"modified_at,omitempty" jsonschema:"RFC 3339"`
}

// FileList is list_files' output.
type FileList struct {
	Path    string     `json:"path"`
	Entries []FileInfo `json:"entries" jsonschema:"the entries, sorted by name"`
	Total   int        `json:"total" jsonschema:"how many entries the directory has"`
	// Truncated reports whether Entries stops at maxListEntries.
	Truncated bool `json:"truncated" jsonschema:"true when only the first entries are listed; narrow the path or use run_command with find or ls"`
}

// StatOutput is stat_file's output.
type StatOutput struct {
	Path   string    `json:"path"`
	Exists bool      `json:"exists"`
	Info   *FileInfo `json:"info,omitempty" jsonschema:"the file's description, when it exists"`
}

func (s *Server) addRuntimeTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "run_command",
		Description: "Run a shell command in a sandbox and return its stdout, stderr and exit code when it ends. " +
			"A non-zero exit code is a result, not an error. Output past the server's limit is cut with a marker.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(true), OpenWorldHint: ptr.To(false)},
	}, s.runCommand)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "write_file",
		Description: "Write a file in a sandbox, creating missing directories and replacing an existing file.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(true), IdempotentHint: true, OpenWorldHint: ptr.To(false)},
	}, s.writeFile)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "read_file",
		Description: "Read a file from a sandbox: text as is, binary content base64-encoded.",
		Annotations: readOnly(),
	}, s.readFile)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_files",
		Description: "List a directory of a sandbox: names, types, sizes, modes and modification times.",
		Annotations: readOnly(),
	}, s.listFiles)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "stat_file",
		Description: "Tell whether a path exists in a sandbox and, if it does, describe it.",
		Annotations: readOnly(),
	}, s.statFile)
}

// attach returns the Ready sandbox name, waiting a little for one still starting; a suspended
// sandbox is an error that says to resume it.
func (s *Server) attach(ctx context.Context, name string) (*sdk.Sandbox, error) {
	if _, err := s.claim(ctx, name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, attachTimeout)
	defer cancel()
	sb, err := s.sdk.Attach(ctx, s.cfg.Namespace, name)
	switch {
	case errors.Is(err, sdk.ErrSuspended):
		return nil, fmt.Errorf("sandbox %q is suspended: call resume_sandbox with name %q first", name, name)
	case errors.Is(err, sdk.ErrNotReady):
		return nil, fmt.Errorf("sandbox %q is not Ready yet; get_sandbox says why, try again later: %w", name, err)
	case err != nil:
		return nil, err
	}
	return sb, nil
}

func (s *Server) runCommand(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	if in.Command == "" {
		return nil, RunOutput{}, errors.New("command is empty: pass a shell command line such as 'ls -la'")
	}
	seconds := in.TimeoutSeconds
	switch {
	case seconds == 0:
		seconds = defaultCommandSeconds
	case seconds < 0 || seconds > maxCommandSeconds:
		return nil, RunOutput{}, fmt.Errorf("timeout_seconds=%d: must be between 1 and %d", seconds, maxCommandSeconds)
	}
	sb, err := s.attach(ctx, in.Sandbox)
	if err != nil {
		return nil, RunOutput{}, err
	}
	rt, err := sb.Runtime()
	if err != nil {
		return nil, RunOutput{}, err
	}
	// The timeout is a timer of ours, not a context deadline: gRPC would send a deadline to the
	// daemon, which could end the stream before this side knew that time was up.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(time.Duration(seconds)*time.Second, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	stdout, stderr := newCappedBuffer(s.cfg.MaxOutputBytes), newCappedBuffer(s.cfg.MaxOutputBytes)
	code, err := rt.Exec(runCtx, sdk.ExecOptions{Argv: []string{"/bin/sh", "-c", in.Command},
		Stdout: stdout, Stderr: stderr, Cwd: in.Cwd, Env: in.Env})
	out := RunOutput{ExitCode: code}
	switch {
	case err != nil && timedOut.Load():
		out.TimedOut, out.ExitCode = true, -1
	case status.Code(err) == codes.PermissionDenied:
		return nil, RunOutput{}, fmt.Errorf("cwd %q leaves the sandbox root; pass a directory inside it, such as '.' or 'src': %w", in.Cwd, err)
	case err != nil:
		return nil, RunOutput{}, err
	}
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	out.Truncated = stdout.Truncated() || stderr.Truncated()
	if out.TimedOut {
		out.Stderr += fmt.Sprintf("\n[paddock: the command ran past timeout_seconds=%d and was killed]\n", seconds)
	}
	return nil, out, nil
}

// fileError turns a file API error into what to do about it.
func fileError(sandbox, path string, err error) error {
	switch {
	case errors.Is(err, sdk.ErrFileNotFound):
		return fmt.Errorf("%q does not exist in sandbox %q; list_files shows what is there", path, sandbox)
	case errors.Is(err, sdk.ErrPermissionDenied):
		return fmt.Errorf("sandboxd refused %q in sandbox %q: the path leaves the sandbox root or its permissions forbid it; use a path relative to the root, such as out/result.txt: %w", path, sandbox, err)
	case errors.Is(err, sdk.ErrIsDirectory):
		return fmt.Errorf("%q in sandbox %q is a directory; list_files lists it", path, sandbox)
	}
	return err
}

func (s *Server) files(ctx context.Context, sandbox string) (*sdk.Files, error) {
	sb, err := s.attach(ctx, sandbox)
	if err != nil {
		return nil, err
	}
	return sb.Files()
}

func (s *Server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteFileInput) (*mcp.CallToolResult, WriteFileOutput, error) {
	var data []byte
	switch in.Encoding {
	case "", EncodingText:
		data = []byte(in.Content)
	case EncodingBase64:
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, WriteFileOutput{}, fmt.Errorf("content is not valid base64 (encoding=base64): %w", err)
		}
	default:
		return nil, WriteFileOutput{}, fmt.Errorf("encoding=%q: want text or base64", in.Encoding)
	}
	mode := fs.FileMode(0o644)
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o777 {
			return nil, WriteFileOutput{}, fmt.Errorf("mode=%q: want octal permission bits such as 0644 or 0755", in.Mode)
		}
		mode = fs.FileMode(m)
	}
	f, err := s.files(ctx, in.Sandbox)
	if err != nil {
		return nil, WriteFileOutput{}, err
	}
	if err := f.Upload(ctx, in.Path, bytes.NewReader(data), mode); err != nil {
		return nil, WriteFileOutput{}, fileError(in.Sandbox, in.Path, err)
	}
	return nil, WriteFileOutput{Path: in.Path, Size: len(data)}, nil
}

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileOutput, error) {
	if in.Encoding != "" && in.Encoding != EncodingText && in.Encoding != EncodingBase64 {
		return nil, ReadFileOutput{}, fmt.Errorf("encoding=%q: want text or base64, or leave it empty", in.Encoding)
	}
	f, err := s.files(ctx, in.Sandbox)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	buf := newCappedBuffer(s.cfg.MaxReadBytes)
	n, _, err := f.Download(ctx, in.Path, buf)
	if err != nil {
		return nil, ReadFileOutput{}, fileError(in.Sandbox, in.Path, err)
	}
	data := buf.Bytes()
	out := ReadFileOutput{Path: in.Path, Size: n, Truncated: buf.Truncated(), Encoding: in.Encoding}
	if out.Encoding == "" {
		out.Encoding = EncodingText
		if !utf8.Valid(data) {
			out.Encoding = EncodingBase64
		}
	}
	if out.Encoding == EncodingText {
		if !utf8.Valid(data) {
			return nil, ReadFileOutput{}, fmt.Errorf("%q is not UTF-8 text; read it with encoding=base64", in.Path)
		}
		out.Content = string(data)
	} else {
		out.Content = base64.StdEncoding.EncodeToString(data)
	}
	return nil, out, nil
}

func fileInfo(fi sdk.FileInfo) FileInfo {
	out := FileInfo{Name: fi.Name, Type: "file", Size: fi.Size, Mode: fmt.Sprintf("%04o", uint32(fi.Mode.Perm()))}
	if fi.IsDir {
		out.Type, out.Size = "directory", 0
	}
	if !fi.ModTime.IsZero() {
		out.ModifiedAt = fi.ModTime.UTC().Format(time.RFC3339)
	}
	return out
}

func (s *Server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, FileList, error) {
	if in.Path == "" {
		in.Path = "."
	}
	f, err := s.files(ctx, in.Sandbox)
	if err != nil {
		return nil, FileList{}, err
	}
	entries, err := f.List(ctx, in.Path)
	if err != nil {
		return nil, FileList{}, fileError(in.Sandbox, in.Path, err)
	}
	out := FileList{Path: in.Path, Entries: make([]FileInfo, 0, min(len(entries), maxListEntries)), Total: len(entries)}
	for _, e := range entries[:min(len(entries), maxListEntries)] {
		out.Entries = append(out.Entries, fileInfo(e))
	}
	out.Truncated = len(entries) > maxListEntries
	return nil, out, nil
}

func (s *Server) statFile(ctx context.Context, _ *mcp.CallToolRequest, in PathInput) (*mcp.CallToolResult, StatOutput, error) {
	f, err := s.files(ctx, in.Sandbox)
	if err != nil {
		return nil, StatOutput{}, err
	}
	fi, err := f.Stat(ctx, in.Path)
	switch {
	case errors.Is(err, sdk.ErrFileNotFound):
		return nil, StatOutput{Path: in.Path}, nil
	case err != nil:
		return nil, StatOutput{}, fileError(in.Sandbox, in.Path, err)
	}
	info := fileInfo(*fi)
	return nil, StatOutput{Path: in.Path, Exists: true, Info: &info}, nil
}
