package envd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// envelope frames one Connect streaming message.
func envelope(flags byte, payload []byte) []byte {
	out := make([]byte, 5, 5+len(payload))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(payload)))
	return append(out, payload...)
}

type frame struct {
	flags byte
	body  string
}

// frames splits a Connect streaming response body into its envelopes.
func frames(t *testing.T, b []byte) []frame {
	t.Helper()
	var out []frame
	for len(b) > 0 {
		if len(b) < 5 {
			t.Fatalf("truncated envelope header %x", b)
		}
		n := binary.BigEndian.Uint32(b[1:5])
		if uint32(len(b)-5) < n {
			t.Fatalf("truncated envelope: %d of %d bytes", len(b)-5, n)
		}
		out = append(out, frame{flags: b[0], body: string(b[5 : 5+n])})
		b = b[5+n:]
	}
	return out
}

// post sends a raw request to the fixture and returns the status, content type and body.
func (f *fixture) post(t *testing.T, path, contentType string, body []byte, header ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set(AccessTokenHeader, testToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// assertHealthy proves the server still answers health and a real call after bad input.
func (f *fixture) assertHealthy(t *testing.T) {
	t.Helper()
	resp, err := http.Get(f.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("health = %d, want 204", resp.StatusCode)
	}
	if status, _, body := f.post(t, "/filesystem.Filesystem/ListDir", "application/json", []byte(`{"path":"/home/user"}`)); status != http.StatusOK {
		t.Fatalf("ListDir after bad input = %d %s", status, body)
	}
}

// TestStartStreamFraming checks the bytes of a server stream: enveloped JSON messages in order
// (start, data, end), proto3 JSON (bytes as base64, zero values omitted), then the end-stream
// frame.
func TestStartStreamFraming(t *testing.T) {
	f := newFixture(t)
	req := envelope(0, []byte(`{"process":{"cmd":"/bin/sh","args":["-c","printf hi; printf err >&2"]},"stdin":false}`))
	status, ctype, body := f.post(t, "/process.Process/Start", "application/connect+json", req)
	if status != http.StatusOK || ctype != "application/connect+json" {
		t.Fatalf("status %d content type %q body %q", status, ctype, body)
	}
	got := frames(t, body)
	if len(got) < 3 || !strings.HasPrefix(got[0].body, `{"event":{"start":{"pid":`) {
		t.Fatalf("frames %q, want start first", got)
	}
	var stdout, stderr string
	for _, fr := range got[1 : len(got)-2] {
		var ev struct {
			Event struct {
				Data struct{ Stdout, Stderr []byte }
			}
		}
		if err := json.Unmarshal([]byte(fr.body), &ev); err != nil {
			t.Fatal(err)
		}
		stdout += string(ev.Event.Data.Stdout)
		stderr += string(ev.Event.Data.Stderr)
	}
	if stdout != "hi" || stderr != "err" {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	// A clean exit omits exitCode (zero) and error; the SDK reads 0. protojson varies its
	// whitespace on purpose, so the JSON is compared decoded.
	end, last := got[len(got)-2], got[len(got)-1]
	var decoded any
	if err := json.Unmarshal([]byte(end.body), &decoded); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"event": map[string]any{"end": map[string]any{"exited": true, "status": "exit status 0"}}}
	if diff := cmp.Diff(want, decoded); end.flags != 0 || diff != "" {
		t.Errorf("end event flags %d (-want +got):\n%s", end.flags, diff)
	}
	if last.flags != 2 || last.body != "{}" {
		t.Errorf("end-stream frame %+v, want flags 2 and {}", last)
	}
}

func TestStartErrorsInTheEndStreamFrame(t *testing.T) {
	f := newFixture(t)
	status, _, body := f.post(t, "/process.Process/Start", "application/connect+json",
		envelope(0, []byte(`{"process":{"cmd":"/no/such/binary"}}`)))
	got := frames(t, body)
	if status != http.StatusOK || len(got) != 1 || got[0].flags != 2 || !strings.Contains(got[0].body, `"code":"not_found"`) {
		t.Fatalf("status %d frames %q, want one end-stream frame with not_found", status, got)
	}
}

// TestProtoJSONMapping checks int64 as a decimal string, enums by name and the timestamp.
func TestProtoJSONMapping(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root.Dir(), "a.txt"), []byte("0123456789"), 0o640); err != nil {
		t.Fatal(err)
	}
	status, ctype, body := f.post(t, "/filesystem.Filesystem/Stat", "application/json", []byte(`{"path":"a.txt"}`))
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("status %d %q %s", status, ctype, body)
	}
	var raw struct{ Entry map[string]any }
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	e := raw.Entry
	for key, want := range map[string]any{
		"name": "a.txt", "path": "/home/user/a.txt", "type": "FILE_TYPE_FILE", "size": "10",
		"mode": float64(0o640), "permissions": "-rw-r-----",
	} {
		if e[key] != want {
			t.Errorf("entry.%s = %#v, want %#v (entry %s)", key, e[key], want, body)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, e["modifiedTime"].(string)); err != nil {
		t.Errorf("modifiedTime %v: %v", e["modifiedTime"], err)
	}
	if _, ok := e["symlinkTarget"]; ok {
		t.Errorf("symlinkTarget present on a regular file: %s", body)
	}
}

func TestConnectErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, path, ctype string
		body              []byte
		header            []string
		status            int
		code              string
	}{
		{name: "not found", path: "/filesystem.Filesystem/Stat", body: []byte(`{"path":"nope"}`), status: 404, code: "not_found"},
		{name: "malformed JSON", path: "/filesystem.Filesystem/Stat", body: []byte(`{"path":`), status: 400, code: "invalid_argument"},
		{name: "wrong field type", path: "/filesystem.Filesystem/ListDir", body: []byte(`{"depth":"deep"}`), status: 400, code: "invalid_argument"},
		{name: "oversized message", path: "/process.Process/SendInput", body: bytes.Repeat([]byte(" "), maxMessageBytes+1), status: 429, code: "resource_exhausted"},
		{name: "unknown process", path: "/process.Process/SendSignal", body: []byte(`{"process":{"pid":999},"signal":"SIGNAL_SIGKILL"}`), status: 404, code: "not_found"},
		{name: "no selector", path: "/process.Process/CloseStdin", body: []byte(`{}`), status: 400, code: "invalid_argument"},
		{name: "already exists", path: "/filesystem.Filesystem/MakeDir", body: []byte(`{"path":"/home/user"}`), status: 409, code: "already_exists"},
		{name: "nul byte", path: "/filesystem.Filesystem/Stat", body: []byte(`{"path":"a\u0000b"}`), status: 400, code: "invalid_argument"},
		{name: "no access token", path: "/filesystem.Filesystem/Stat", body: []byte(`{"path":"."}`), header: []string{AccessTokenHeader, ""}, status: 401, code: "unauthenticated"},
		{name: "wrong access token", path: "/filesystem.Filesystem/Stat", body: []byte(`{"path":"."}`), header: []string{AccessTokenHeader, "nope"}, status: 401, code: "unauthenticated"},
		{name: "unknown user", path: "/process.Process/Start", ctype: "application/connect+json",
			body: envelope(0, []byte(`{"process":{"cmd":"true"}}`)), header: []string{"Authorization", "Basic bWFsbG9yeTo="}, status: 200, code: "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctype := tc.ctype
			if ctype == "" {
				ctype = "application/json"
			}
			status, _, body := f.post(t, tc.path, ctype, tc.body, tc.header...)
			if status != tc.status {
				t.Fatalf("status %d, want %d (body %s)", status, tc.status, body)
			}
			errBody := body
			if ctype == "application/connect+json" {
				fr := frames(t, body)
				errBody = []byte(fr[len(fr)-1].body)
				var end struct{ Error json.RawMessage }
				_ = json.Unmarshal(errBody, &end)
				errBody = end.Error
			}
			var got struct{ Code, Message string }
			if err := json.Unmarshal(errBody, &got); err != nil || got.Code != tc.code || got.Message == "" {
				t.Fatalf("error body %s, want code %q and a message", body, tc.code)
			}
		})
	}
	f.assertHealthy(t)
}

// TestBadEnvelopes: broken stream framing gets a Connect error, and the server keeps serving.
func TestBadEnvelopes(t *testing.T) {
	f := newFixture(t)
	for name, body := range map[string][]byte{
		"truncated header":   {0, 0, 0},
		"truncated message":  envelope(0, []byte(`{"process":{"cmd":"true"}}`))[:10],
		"compressed flag":    envelope(1, []byte(`{}`)),
		"oversized envelope": {0, 0xff, 0xff, 0xff, 0xff},
		"not JSON":           envelope(0, []byte("\x00\x01")),
		"no message":         nil,
	} {
		t.Run(name, func(t *testing.T) {
			status, _, resp := f.post(t, "/process.Process/Start", "application/connect+json", body)
			if status == http.StatusOK {
				fr := frames(t, resp)
				if last := fr[len(fr)-1]; last.flags != 2 || !strings.Contains(last.body, `"error"`) {
					t.Fatalf("frames %q, want an end-stream error", fr)
				}
			}
		})
	}
	if status, _, _ := f.post(t, "/nosuch.Service/Method", "application/json", []byte(`{}`)); status != http.StatusNotFound {
		t.Errorf("unknown service: %d, want 404 (the SDK maps it to Unimplemented)", status)
	}
	f.assertHealthy(t)
	if n := f.procs.Running(); n != 0 {
		t.Errorf("%d processes running after bad envelopes", n)
	}
}
