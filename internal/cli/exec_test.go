package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/sdk"
)

func TestSplitExecArgs(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		dash        int
		wantClaim   string
		wantCommand []string
		wantErr     string
	}{
		{name: "claim and command", args: []string{"c", "ls", "-l"}, dash: 1, wantClaim: "c", wantCommand: []string{"ls", "-l"}},
		{name: "no dash", args: []string{"c", "ls"}, dash: -1, wantErr: `separate the command with "--"`},
		{name: "no claim", args: []string{"ls"}, dash: 0, wantErr: "CLAIM is missing"},
		{name: "nothing", args: nil, dash: -1, wantErr: "CLAIM is missing"},
		{name: "no command", args: []string{"c"}, dash: 1, wantErr: `COMMAND is missing after "--"`},
		{name: "claim only, no dash", args: []string{"c"}, dash: -1, wantErr: `COMMAND is missing after "--"`},
		{name: "two claims", args: []string{"a", "b", "ls"}, dash: 2, wantErr: `one CLAIM before "--", got 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim, command, err := SplitExecArgs(tc.args, tc.dash)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if claim != tc.wantClaim {
				t.Errorf("claim = %q, want %q", claim, tc.wantClaim)
			}
			if diff := cmp.Diff(tc.wantCommand, command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJoinCommand(t *testing.T) {
	tests := map[string][]string{
		"ls -l /tmp":                            {"ls", "-l", "/tmp"},
		`sh -c 'echo "a b" | wc -c'`:            {"sh", "-c", `echo "a b" | wc -c`},
		`echo 'it'\''s' ''`:                     {"echo", "it's", ""},
		`python3 -c 'print(6*7)' 'x;y' '$HOME'`: {"python3", "-c", "print(6*7)", "x;y", "$HOME"},
	}
	for want, words := range tests {
		if got := JoinCommand(words); got != want {
			t.Errorf("JoinCommand(%q) = %q, want %q", words, got, want)
		}
	}
}

// legacyRuntime serves POST /execute on loopback: it records the command and answers with the
// result the test chose.
func legacyRuntime(t *testing.T, res sdk.Result) (*sdk.Runtime, *[]string) {
	t.Helper()
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/execute" {
			http.Error(w, "not the legacy execute endpoint", http.StatusNotFound)
			return
		}
		var body struct {
			Command string `json:"command"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = append(got, body.Command)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	rt, err := sdk.NewRuntime(sdk.Endpoint{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return rt, &got
}

func TestRunExecPassesOutputAndExitCode(t *testing.T) {
	for _, code := range []int{0, 3, 127} {
		rt, commands := legacyRuntime(t, sdk.Result{Stdout: "out\n", Stderr: "err\n", ExitCode: code})
		var stdout, stderr bytes.Buffer
		err := RunExec(context.Background(), rt, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, &stdout, &stderr)
		if got := ExitCode(err); got != code {
			t.Errorf("exit %d: ExitCode(%v) = %d", code, err, got)
		}
		if stdout.String() != "out\n" || stderr.String() != "err\n" {
			t.Errorf("exit %d: stdout %q stderr %q, want out and err", code, stdout.String(), stderr.String())
		}
		if diff := cmp.Diff([]string{`sh -c 'echo out; echo err >&2; exit 3'`}, *commands); diff != "" {
			t.Errorf("commands the runtime got (-want +got):\n%s", diff)
		}
	}
}

func TestRunExecRuntimeErrorIsNotAnExitCode(t *testing.T) {
	rt, err := sdk.NewRuntime(sdk.Endpoint{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no retries against a port nobody listens on
	err = RunExec(ctx, rt, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{})
	var exit *ExitError
	if err == nil || errors.As(err, &exit) {
		t.Errorf("err = %v, want a transport error, not an *ExitError", err)
	}
	if ExitCode(err) != 1 {
		t.Errorf("ExitCode = %d, want 1", ExitCode(err))
	}
}
