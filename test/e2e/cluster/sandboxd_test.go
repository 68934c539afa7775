package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// sandboxd's ports in examples/sandboxd-template.yaml.
const (
	sandboxdREST = "8080"
	sandboxdGRPC = "9090"
)

// testSandboxd talks to sandboxd in a Sandbox of the default sandboxd template, from the host by
// pod IP, over gRPC and REST: exit codes, a stream observed while its process still runs, a
// binary file byte for byte, escapes refused, and a healthy daemon after all that bad input.
func testSandboxd(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "sandboxd", ns).Obj()
	framework.MustCreate(t, ctx, c, sb)
	ip := waitSandboxReady(t, c, sb)
	rest := "http://" + net.JoinHostPort(ip, sandboxdREST)
	token := sandboxToken(t, ctx, c, sb)
	auth := http.Header{"Authorization": {"Bearer " + token}}
	procs := dialSandboxd(t, ip, token)

	t.Run("echo exits 0 with its output", func(t *testing.T) {
		res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"echo", "hello"}}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{"hello\n", "", int32(0)}, []any{string(res.GetStdout()), string(res.GetStderr()), res.GetExitCode()}); diff != "" {
			t.Errorf("echo hello: stdout, stderr, exit code (-want +got):\n%s", diff)
		}
	})
	t.Run("a non-zero exit is reported", func(t *testing.T) {
		res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"sh", "-c", "echo broken >&2; exit 7"}}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{"broken\n", int32(7)}, []any{string(res.GetStderr()), res.GetExitCode()}); diff != "" {
			t.Errorf("exit 7: stderr, exit code (-want +got):\n%s", diff)
		}
	})
	t.Run("a long-running command streams before it ends", func(t *testing.T) { testGRPCStream(t, ctx, procs) })
	t.Run("a binary file round-trips byte for byte", func(t *testing.T) { testFileRoundTrip(t, ctx, rest, auth) })
	t.Run("escapes from the root are refused", func(t *testing.T) { testEscapesRefused(t, ctx, rest, auth, procs) })
	t.Run("the daemon is healthy after bad input", func(t *testing.T) {
		if status, body := request(t, ctx, http.MethodGet, rest+"/v1/health", nil, nil); status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Errorf("GET /v1/health = %d %s, want 200 ok", status, body)
		}
		res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"echo", "alive"}}})
		if err != nil || string(res.GetStdout()) != "alive\n" {
			t.Errorf("echo alive = %v, %v; want stdout alive", res, err)
		}
	})
}

// testGRPCStream starts a command that prints, then copies stdin until it is closed: its first
// chunk can only arrive while it runs. What the test writes comes back; closing stdin ends it.
func testGRPCStream(t *testing.T, ctx context.Context, procs processv1.ProcessServiceClient) {
	stream, err := procs.Start(ctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{
		Command: []string{"sh", "-c", "echo first; cat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stream.Recv()
	if err != nil || ev.GetInit() == nil {
		t.Fatalf("first event = %v, %v; want init", ev, err)
	}
	id := ev.GetInit().GetProcessId()
	if ev, err = stream.Recv(); err != nil || string(ev.GetStdout()) != "first\n" {
		t.Fatalf("second event = %v, %v; want stdout \"first\\n\" while the process waits on stdin", ev, err)
	}
	if _, err := procs.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("more\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := procs.WriteStdin(ctx, &processv1.WriteStdinRequest{ProcessId: id, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}}); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended without an exit event: %v (output so far %q)", err, rest.String())
		}
		rest.Write(ev.GetStdout())
		if exit := ev.GetExit(); exit != nil {
			if diff := cmp.Diff([]any{"more\n", int32(0)}, []any{rest.String(), exit.GetExitCode()}); diff != "" {
				t.Errorf("rest of the stream: stdout, exit code (-want +got):\n%s", diff)
			}
			return
		}
	}
}

func testFileRoundTrip(t *testing.T, ctx context.Context, rest string, auth http.Header) {
	data := make([]byte, 4<<20+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if status, body := request(t, ctx, http.MethodPut, rest+"/v1/files/e2e%2Fblob.bin?mode=0600", bytes.NewReader(data), auth); status != http.StatusNoContent {
		t.Fatalf("PUT = %d %s, want 204", status, body)
	}
	status, body := request(t, ctx, http.MethodGet, rest+"/v1/files/e2e/blob.bin", nil, auth)
	if status != http.StatusOK || !bytes.Equal([]byte(body), data) {
		t.Fatalf("GET = %d with %d bytes, want 200 with the %d bytes written", status, len(body), len(data))
	}
}

// testEscapesRefused checks the documented confinement: ".." and a symlink out of the root are
// refused with 403 PERMISSION_DENIED (gRPC PermissionDenied for a cwd); an absolute path is
// re-rooted, so it never reaches the file of that name outside the root.
func testEscapesRefused(t *testing.T, ctx context.Context, rest string, auth http.Header, procs processv1.ProcessServiceClient) {
	// A link out of the root, made the way an agent's command would.
	if res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{
		Command: []string{"ln", "-s", "/usr/local/bin", "escape"},
	}}); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("ln -s = %v, %v", res, err)
	}
	forbidden := []struct{ method, path string }{
		{http.MethodGet, "/v1/files/..%2F..%2Fusr%2Flocal%2Fbin%2Fsandboxd"},
		{http.MethodGet, "/v1/files/%2E%2E/etc/hostname"},
		{http.MethodPut, "/v1/files/..%2Fplanted"},
		{http.MethodGet, "/v1/files/escape/sandboxd"},
		{http.MethodPut, "/v1/files/escape/planted"},
		{http.MethodDelete, "/v1/files/escape/sandboxd"},
	}
	for _, f := range forbidden {
		status, body := request(t, ctx, f.method, rest+f.path, strings.NewReader("x"), auth)
		if status != http.StatusForbidden || errorCode(body) != "PERMISSION_DENIED" {
			t.Errorf("%s %s = %d %s, want 403 PERMISSION_DENIED", f.method, f.path, status, body)
		}
	}
	// Re-rooted: /usr/local/bin/sandboxd means <root>/usr/local/bin/sandboxd, which does not exist.
	if status, body := request(t, ctx, http.MethodGet, rest+"/v1/files/%2Fusr%2Flocal%2Fbin%2Fsandboxd", nil, auth); status != http.StatusNotFound || errorCode(body) != "NOT_FOUND" {
		t.Errorf("GET of an absolute path outside the root = %d (%d bytes), want 404 NOT_FOUND", status, len(body))
	}
	_, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: []string{"pwd"}, Cwd: ptr("../..")}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Execute with cwd ../.. = %v, want PermissionDenied", err)
	}
}

// paddockClient is a controller-runtime client with Paddock's types.
func paddockClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sandboxdSandbox is a Sandbox with the pod of examples/sandboxd-template.yaml, the default
// sandboxd template.
func sandboxdSandbox(t *testing.T, name, ns string) *builder.SandboxWrapper {
	t.Helper()
	objs, err := framework.ReadExample("sandboxd-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if len(objs) != 1 || runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, tpl) != nil {
		t.Fatalf("examples/sandboxd-template.yaml holds %d objects; want the one SandboxTemplate", len(objs))
	}
	withoutMissingRuntimeClass(t, &tpl.Spec.PodTemplate.Spec)
	w := builder.MakeSandbox(name, ns).PodSpec(tpl.Spec.PodTemplate.Spec)
	for k, v := range tpl.Spec.PodTemplate.ObjectMeta.Labels {
		w.PodLabel(k, v)
	}
	return w
}

// dialSandboxd connects to sandboxd's gRPC service at ip, presenting token on every call.
func dialSandboxd(t *testing.T, ip, token string) processv1.ProcessServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(net.JoinHostPort(ip, sandboxdGRPC), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return processv1.NewProcessServiceClient(conn)
}

// request sends one HTTP request with the given headers and returns status and body.
func request(t *testing.T, ctx context.Context, method, url string, body io.Reader, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// errorCode is the "code" of sandboxd's {"code","message"} error body.
func errorCode(body string) string {
	var e struct{ Code string }
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return fmt.Sprintf("(not a JSON error: %v)", err)
	}
	return e.Code
}

// bearer sends a sandbox token as gRPC "authorization" metadata over plaintext, as sandboxd on
// the pod network expects.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// sandboxToken reads a Sandbox's token from the credentials Secret the controller made for it.
func sandboxToken(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox) string {
	t.Helper()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: sb.Namespace, Name: credentials.SandboxSecretName(sb.Name)}
	if err := c.Get(ctx, key, secret); err != nil {
		t.Fatalf("reading the credentials Secret of Sandbox %s: %v", sb.Name, err)
	}
	return string(secret.Data[credentials.TokenDataKey])
}
