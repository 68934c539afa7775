package server

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
)

// eventReader reads the NDJSON events of POST /v1/processes.
type eventReader struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func startHTTPProcess(t *testing.T, rest, body string) *eventReader {
	t.Helper()
	resp, err := http.Post(rest+"/v1/processes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ndjson {
		t.Fatalf("POST /v1/processes = %d %s, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), ndjson)
	}
	return &eventReader{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

func (e *eventReader) next() *processv1.StartResponse {
	e.t.Helper()
	if !e.sc.Scan() {
		e.t.Fatalf("event stream ended early: %v", e.sc.Err())
	}
	ev := &processv1.StartResponse{}
	if err := protojson.Unmarshal(e.sc.Bytes(), ev); err != nil {
		e.t.Fatalf("event %q: %v", e.sc.Text(), err)
	}
	return ev
}

func TestHTTPProcessStreamsAndTakesStdin(t *testing.T) {
	td := startDaemon(t)
	ev := startHTTPProcess(t, td.rest, `{"config":{"command":["sh","-c","echo first; read line; echo \"got $line\"; echo oops >&2; exit 4"]}}`)
	id := ev.next().GetInit().GetProcessId()
	if id <= 0 {
		t.Fatalf("first event has process id %d, want an init event with a positive id", id)
	}
	// The process is blocked on stdin, so this chunk can only come from a live stream.
	if got := string(ev.next().GetStdout()); got != "first\n" {
		t.Fatalf("first output chunk = %q, want %q", got, "first\n")
	}
	url := td.rest + "/v1/processes/" + itoa(id) + "/stdin?eof=true"
	if status, body := do(t, http.MethodPost, url, strings.NewReader("hello\n")); status != http.StatusNoContent {
		t.Fatalf("POST stdin = %d %s, want 204", status, body)
	}
	var stdout, stderr string
	var exit *processv1.ExitEvent
	for exit == nil {
		e := ev.next()
		stdout += string(e.GetStdout())
		stderr += string(e.GetStderr())
		exit = e.GetExit()
	}
	got := []string{stdout, stderr, itoa(exit.GetExitCode())}
	if diff := cmp.Diff([]string{"got hello\n", "oops\n", "4"}, got); diff != "" {
		t.Errorf("stdout, stderr, exit code (-want +got):\n%s", diff)
	}
	if status, body := do(t, http.MethodPost, url, nil); status != http.StatusNotFound {
		t.Errorf("stdin after the stream ended = %d %s, want 404", status, body)
	}
}

func TestHTTPProcessSignal(t *testing.T) {
	td := startDaemon(t)
	ev := startHTTPProcess(t, td.rest, `{"config":{"command":["sh","-c","echo ready; exec cat"]}}`)
	id := ev.next().GetInit().GetProcessId()
	if got := string(ev.next().GetStdout()); got != "ready\n" {
		t.Fatalf("first output chunk = %q, want ready", got)
	}
	if status, body := do(t, http.MethodPost, td.rest+"/v1/processes/"+itoa(id)+"/signal?signal=SIGNAL_SIGKILL", nil); status != http.StatusNoContent {
		t.Fatalf("POST signal = %d %s, want 204", status, body)
	}
	if code := ev.next().GetExit().GetExitCode(); code != -1 {
		t.Errorf("exit code after SIGKILL = %d, want -1", code)
	}
}

func TestHTTPProcessBadInput(t *testing.T) {
	td := startDaemon(t)
	cases := []struct {
		name, method, path, body string
		wantStatus               int
		wantCode                 string
	}{
		{"not JSON", http.MethodPost, "/v1/processes", "echo hi", 400, codeInvalidArgument},
		{"unknown field", http.MethodPost, "/v1/processes", `{"cmd":["echo"]}`, 400, codeInvalidArgument},
		{"no command", http.MethodPost, "/v1/processes", `{"config":{}}`, 400, codeInvalidArgument},
		{"cwd escapes", http.MethodPost, "/v1/processes", `{"config":{"command":["pwd"],"cwd":"../.."}}`, 403, codePermissionDenied},
		{"missing binary", http.MethodPost, "/v1/processes", `{"config":{"command":["/no/such/binary"]}}`, 404, codeNotFound},
		{"stdin of unknown process", http.MethodPost, "/v1/processes/999/stdin", "x", 404, codeNotFound},
		{"id not a number", http.MethodPost, "/v1/processes/abc/stdin", "x", 400, codeInvalidArgument},
		{"eof not a boolean", http.MethodPost, "/v1/processes/1/stdin?eof=maybe", "", 400, codeInvalidArgument},
		{"unknown signal", http.MethodPost, "/v1/processes/1/signal?signal=SIGHUP", "", 400, codeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(t, tc.method, td.rest+tc.path, strings.NewReader(tc.body))
			if status != tc.wantStatus || !strings.Contains(body, `"code":"`+tc.wantCode+`"`) {
				t.Errorf("%s %s = %d %s, want %d with code %s", tc.method, tc.path, status, body, tc.wantStatus, tc.wantCode)
			}
		})
	}
	td.assertHealthy(t)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestHTTPProcessExitOnLastInput covers a process that exits on the data of the call that also
// closes its stdin: the close finds it gone, and the call still succeeds. The exit races the
// close, so the test repeats it.
func TestHTTPProcessExitOnLastInput(t *testing.T) {
	td := startDaemon(t)
	for i := range 20 {
		ev := startHTTPProcess(t, td.rest, `{"config":{"command":["sh","-c","read line"]}}`)
		id := ev.next().GetInit().GetProcessId()
		url := td.rest + "/v1/processes/" + itoa(id) + "/stdin?eof=true"
		if status, body := do(t, http.MethodPost, url, strings.NewReader("last\n")); status != http.StatusNoContent {
			t.Fatalf("run %d: POST stdin = %d %s, want 204", i, status, body)
		}
		for ev.next().GetExit() == nil {
		}
	}
}
