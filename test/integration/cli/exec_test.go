package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// loopbackRuntime serves the legacy POST /execute on 127.0.0.1 and records the commands: the
// sandbox runtime the real Pod would run. A command containing "fail" exits 3.
func loopbackRuntime(t *testing.T) (port int, commands func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Command string `json:"command"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/execute" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "want POST /execute with a JSON command", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, body.Command)
		mu.Unlock()
		res := sdk.Result{Stdout: "ran " + body.Command + "\n", Stderr: "note\n"}
		if strings.Contains(body.Command, "fail") {
			res.ExitCode = 3
		}
		_ = json.NewEncoder(w).Encode(res)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func TestExecRunsTheCommandAndPassesItsExitCode(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	port, commands := loopbackRuntime(t)
	env.PlayKubelet(t, ns, "127.0.0.1") // the test's sandboxd listens on loopback
	makePool(t, ns, 1)
	mustPaddock(t, kc, "claim", "--pool", "pool", "--name", "agent")
	rp := strconv.Itoa(port)

	stdout, stderr := mustPaddock(t, kc, "exec", "agent", "--runtime-port", rp, "--", "python3", "-c", "print(6*7)")
	if stdout != "ran python3 -c 'print(6*7)'\n" || stderr != "note\n" {
		t.Errorf("exec stdout %q stderr %q, want the runtime's output passed through", stdout, stderr)
	}
	stdout, _, err := paddock(t, kc, "exec", "agent", "--runtime-port", rp, "--", "sh", "-c", "fail now")
	if cli.ExitCode(err) != 3 || stdout != "ran sh -c 'fail now'\n" {
		t.Errorf("exec of a failing command: err %v (exit code %d), stdout %q; want exit code 3 and the output", err, cli.ExitCode(err), stdout)
	}
	if _, _, err := paddock(t, kc, "exec", "agent", "--runtime-port", "0", "--", "true"); err == nil || !strings.Contains(err.Error(), "--runtime-port 0") {
		t.Errorf("exec --runtime-port 0: err = %v, want it to name the flag", err)
	}
	// The binary itself must exit with the command's code and print no error of its own.
	bin := filepath.Join(t.TempDir(), "paddock")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(framework.RepoRoot(), "cmd", "paddock")).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/paddock: %v\n%s", err, out)
	}
	var procOut, procErr strings.Builder
	proc := exec.Command(bin, "--kubeconfig", kc, "exec", "agent", "--runtime-port", rp, "--", "fail", "again")
	proc.Stdout, proc.Stderr = &procOut, &procErr
	err = proc.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 || procOut.String() != "ran fail again\n" || procErr.String() != "note\n" {
		t.Errorf("paddock binary: %v, stdout %q, stderr %q; want exit status 3 with only the command's output", err, procOut.String(), procErr.String())
	}

	want := []string{"python3 -c 'print(6*7)'", "sh -c 'fail now'", "fail again"}
	if diff := cmp.Diff(want, commands()); diff != "" {
		t.Errorf("commands the runtime ran (-want +got):\n%s", diff)
	}
}

// TestExecInteractive streams stdin to a command through the real sandboxd's gRPC service and
// runs one on a terminal; exit codes come back either way.
func TestExecInteractive(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	env.PlayKubelet(t, ns, "127.0.0.1") // the test's sandboxd listens on loopback
	makePool(t, ns, 1)
	mustPaddock(t, kc, "claim", "--pool", "pool", "--name", "agent")
	_, grpcPort, _ := loopbackSandboxdGRPC(t, ns, "agent")
	gp := strconv.Itoa(grpcPort)

	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	stdout, _ := mustPaddockIn(t, kc, bytes.NewReader(data), "exec", "-i", "agent", "--grpc-port", gp, "--", "cat")
	if !bytes.Equal([]byte(stdout), data) {
		t.Errorf("exec -i cat gave %d bytes back, want the %d sent", len(stdout), len(data))
	}
	stdout, stderr, err := paddockIn(t, kc, strings.NewReader("hello\n"), "exec", "-i", "agent", "--grpc-port", gp, "--", "sh", "-c", "read x; echo got $x; echo oops >&2; exit 9")
	if cli.ExitCode(err) != 9 || stdout != "got hello\n" || stderr != "oops\n" {
		t.Errorf("exec -i: exit code %d (%v), stdout %q, stderr %q; want 9, the line read and the stderr line", cli.ExitCode(err), err, stdout, stderr)
	}
	stdout, _ = mustPaddock(t, kc, "exec", "-t", "agent", "--grpc-port", gp, "--", "sh", "-c", "tty; echo line")
	if !strings.HasPrefix(stdout, "/dev/pts/") || !strings.HasSuffix(stdout, "line\r\n") {
		t.Errorf("exec -t output %q, want a /dev/pts terminal and CRLF line ends", stdout)
	}
	for args, wantErr := range map[string]string{
		"exec -i agent --router-url http://127.0.0.1:1 -- cat": "drop --router-url",
		"exec -i agent --grpc-port 0 -- cat":                   "--grpc-port 0: must be between 1 and 65535",
	} {
		if _, _, err := paddock(t, kc, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("paddock %s: err = %v, want it to contain %q", args, err, wantErr)
		}
	}
}
