package interpreter

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Languages served. E2B also names typescript, r and java; they are refused with a message
// naming these.
const (
	Python     = "python"
	JavaScript = "javascript"
	Bash       = "bash"
)

// NormalizeLanguage is E2B's language normalisation: empty is python, names are trimmed and
// lower-cased, js is javascript and ts is typescript.
func NormalizeLanguage(lang string) string {
	switch l := strings.ToLower(strings.TrimSpace(lang)); l {
	case "":
		return Python
	case "js":
		return JavaScript
	case "ts":
		return "typescript"
	default:
		return l
	}
}

func supported(lang string) bool { return lang == Python || lang == JavaScript || lang == Bash }

// unsupportedMessage names the languages that are served.
func unsupportedMessage(lang string) string {
	return `language "` + lang + `" is not served by this sandbox's code interpreter; use python, javascript (js) or bash`
}

// envName is what a per-call environment variable may be called (bash needs an identifier).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Fields of a result line, by the MIME type they come from; any other MIME type goes to extra.
var resultFields = []struct{ mime, field string }{
	{"text/plain", "text"},
	{"text/html", "html"},
	{"text/markdown", "markdown"},
	{"image/svg+xml", "svg"},
	{"image/png", "png"},
	{"image/jpeg", "jpeg"},
	{"application/pdf", "pdf"},
	{"text/latex", "latex"},
	{"application/json", "json"},
	{"application/javascript", "javascript"},
	{"e2b/data", "data"},
	{"e2b/chart", "chart"},
}

// message is one JSON line a kernel driver writes on fd 4, or a mark its output streams carried.
type message struct {
	Type string `json:"type"`
	// Text of stdout and stderr; for type mark, the stream the mark was seen on.
	Text string `json:"text,omitempty"`
	// Main and Data of a result: whether it is the cell's value, and its MIME bundle.
	Main bool                       `json:"main,omitempty"`
	Data map[string]json.RawMessage `json:"data,omitempty"`
	// Name, Value and Traceback of an error.
	Name      string `json:"name,omitempty"`
	Value     string `json:"value,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	// Marks of done: the streams the driver wrote the end-of-cell mark to.
	Marks []string `json:"marks,omitempty"`
	// Status of done (bash): the cell's exit status.
	Status int `json:"status,omitempty"`
	// Cell of interrupt_ack: the number of the cell (1, 2, ... in the kernel) whose interrupt
	// request the driver read.
	Cell int `json:"cell,omitempty"`
}

// Wire line types of POST /execute.
const (
	lineExecutions = "number_of_executions"
	lineStdout     = "stdout"
	lineStderr     = "stderr"
	lineResult     = "result"
	lineError      = "error"
	lineKeepalive  = "keepalive"
	lineEnd        = "end_of_execution"
)

// streamLine is a stdout or stderr line; timestamp is Python's isoformat of the server's clock.
func streamLine(stream, text string, now time.Time) []byte {
	return encodeLine(map[string]any{"type": stream, "text": text, "timestamp": now.UTC().Format("2006-01-02T15:04:05.000000-07:00")})
}

func errorLine(name, value, traceback string) []byte {
	return encodeLine(map[string]any{"type": lineError, "name": name, "value": value, "traceback": traceback})
}

func typeLine(t string) []byte { return encodeLine(map[string]any{"type": t}) }

func executionsLine(n int) []byte {
	return encodeLine(map[string]any{"type": lineExecutions, "execution_count": n})
}

// resultLine maps a MIME bundle to E2B's result line: known types to their fields (text with
// one pair of outer quotes stripped, as E2B's server does), the rest under extra.
func resultLine(data map[string]json.RawMessage, main bool) []byte {
	line := map[string]any{"type": lineResult, "is_main_result": main}
	extra := map[string]json.RawMessage{}
	known := map[string]string{}
	for _, f := range resultFields {
		known[f.mime] = f.field
	}
	for mime, v := range data {
		field, ok := known[mime]
		switch {
		case !ok:
			extra[mime] = v
		case field == "text":
			var s string
			if json.Unmarshal(v, &s) == nil {
				line[field] = stripQuotes(s)
			}
		default:
			line[field] = v
		}
	}
	line["extra"] = extra
	return encodeLine(line)
}

func stripQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// encodeLine is v as one ASCII-only JSON line: the SDK decodes every network chunk on its own, so
// a multi-byte character split across chunks would be corrupted; \u escapes never are.
func encodeLine(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unencodable values fail (none are built here); say so rather than send a blank line.
		return encodeLine(map[string]any{"type": lineError, "name": "EncodingError", "value": err.Error(), "traceback": ""})
	}
	return asciiJSON(buf.Bytes())
}

// asciiJSON rewrites every non-ASCII character of encoded JSON (only strings hold any) as \u
// escapes, with surrogate pairs beyond the BMP.
func asciiJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	const hex = "0123456789abcdef"
	esc := func(r rune) {
		out = append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			esc(0xd800 + (r>>10)&0x3ff)
			esc(0xdc00 + r&0x3ff)
			continue
		}
		esc(r)
	}
	return out
}
