package sandboxdclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

var testKey = bytes.Repeat([]byte{7}, credentials.KeySize)

// request is what the test sandboxd saw of one request.
type request struct {
	Method, Path, Authorization, ContentType, Body string
}

// fakeSandboxd answers every request with status and body, on loopback, and records what it saw.
type fakeSandboxd struct {
	srv  *httptest.Server
	port int

	mu     sync.Mutex
	status int
	body   string
	seen   []request
}

func startSandboxd(t *testing.T) *fakeSandboxd {
	t.Helper()
	f := &fakeSandboxd{status: http.StatusOK, body: "{}"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), Body: string(body)})
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, f.body)
	}))
	t.Cleanup(f.srv.Close)
	_, port, err := net.SplitHostPort(f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	f.port, _ = strconv.Atoi(port)
	return f
}

func (f *fakeSandboxd) answer(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.body = status, body
}

func (f *fakeSandboxd) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.seen...)
}

// client is a client with the test key that reaches f through the default address.
func (f *fakeSandboxd) client() *Client { return New(Options{Key: testKey, Port: f.port}) }

// sandbox is a Sandbox whose Pod is on loopback and declares port on its first container.
func sandbox(port int) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", UID: "uid-1"}}
	sb.Status.PodIPs = []string{"127.0.0.1"}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "sandboxd", Ports: []corev1.ContainerPort{{ContainerPort: int32(port)}}}}
	return sb
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		status    int
		body      string
		wantErr   string
		permanent bool
	}{
		{status: http.StatusOK, body: `{"claimUID":"uid-1"}`},
		{status: http.StatusConflict, body: `{"message":"sandbox already serves another claim"}`,
			wantErr: `sandboxd is bound to another claim: sandboxd answered 409 Conflict: {"message":"sandbox already serves another claim"}`, permanent: true},
		{status: http.StatusUnauthorized, body: "wrong token", wantErr: "sandboxd answered 401 Unauthorized: wrong token", permanent: true},
		{status: http.StatusForbidden, body: "disabled", wantErr: "sandboxd answered 403 Forbidden: disabled", permanent: true},
		{status: http.StatusBadRequest, body: "env[0].name", wantErr: "sandboxd answered 400 Bad Request: env[0].name", permanent: true},
		{status: http.StatusNotFound, body: "", wantErr: "sandboxd answered 404 Not Found: ", permanent: true},
		{status: http.StatusRequestEntityTooLarge, body: "too big", wantErr: "sandboxd answered 413 Request Entity Too Large: too big", permanent: true},
		{status: http.StatusServiceUnavailable, body: "shutting down\n", wantErr: "sandboxd answered 503 Service Unavailable: shutting down"},
		{status: http.StatusInternalServerError, body: "", wantErr: "sandboxd answered 500 Internal Server Error: "},
	}
	f := startSandboxd(t)
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			f.answer(tt.status, tt.body)
			err := f.client().PutClaimSettings(context.Background(), sandbox(f.port), claim.Settings{ClaimName: "c", ClaimUID: "uid-1"})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("PutClaimSettings = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("PutClaimSettings = %v, want %q", err, tt.wantErr)
			}
			if got := Permanent(err); got != tt.permanent {
				t.Errorf("Permanent = %v, want %v", got, tt.permanent)
			}
			if got, want := errors.Is(err, ErrBoundElsewhere), tt.status == http.StatusConflict; got != want {
				t.Errorf("bound elsewhere = %v, want %v (a 409 marks a member somebody else bound)", got, want)
			}
		})
	}
}

func TestUnreachableIsNotPermanent(t *testing.T) {
	port := closedPort(t)
	err := New(Options{Key: testKey, Port: port}).PutClaimSettings(context.Background(), sandbox(port), claim.Settings{ClaimUID: "uid-1"})
	if err == nil || Permanent(err) {
		t.Fatalf("PutClaimSettings to a closed port = %v; want an error a retry may fix", err)
	}
}

func TestRequests(t *testing.T) {
	f := startSandboxd(t)
	sb := sandbox(f.port)
	token := "Bearer " + credentials.ControlToken(testKey, "ns", "sb", "uid-1")
	settings := claim.Settings{ClaimName: "c", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "TASK", Value: "42"}}}
	body, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.client().PutClaimSettings(ctx, sb, settings); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client().ClaimSettings(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Port: f.port}).Activity(ctx, sb); err != nil {
		t.Fatal(err)
	}
	want := []request{
		{Method: http.MethodPut, Path: sandboxd.ClaimSettingsPath, Authorization: token, ContentType: "application/json", Body: string(body)},
		{Method: http.MethodGet, Path: sandboxd.ClaimSettingsPath, Authorization: token},
		// Without a key (a sandboxd run --allow-unauthenticated) no token is sent.
		{Method: http.MethodGet, Path: sandboxd.ActivityPath},
	}
	if diff := cmp.Diff(want, f.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestClaimSettings(t *testing.T) {
	f := startSandboxd(t)
	f.answer(http.StatusOK, `{"claimName":"c","claimUID":"uid-1","env":["TASK"]}`)
	got, err := f.client().ClaimSettings(context.Background(), sandbox(f.port))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claim.Status{ClaimName: "c", ClaimUID: "uid-1", Env: []string{"TASK"}}, got); diff != "" {
		t.Errorf("ClaimSettings (-want +got):\n%s", diff)
	}
	f.answer(http.StatusOK, `{"claimUID":`)
	if _, err := f.client().ClaimSettings(context.Background(), sandbox(f.port)); err == nil || !strings.Contains(err.Error(), "malformed answer") {
		t.Errorf("ClaimSettings of a cut answer = %v, want a malformed-answer error", err)
	}
}

func TestAddress(t *testing.T) {
	withIPs := func(ips ...string) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb"}}
		sb.Status.PodIPs = ips
		return sb
	}
	tests := []struct {
		name string
		port int
		sb   *agentsv1beta1.Sandbox
		want string
	}{
		{name: "first pod IP and the REST port", sb: withIPs("198.18.0.7", "198.18.0.8"), want: "198.18.0.7:8080"},
		{name: "IPv6", sb: withIPs("fd00::7"), want: "[fd00::7]:8080"},
		{name: "another port", port: 9090, sb: withIPs("198.18.0.7"), want: "198.18.0.7:9090"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New(Options{Port: tt.port}).address(tt.sb)
			if err != nil || got != tt.want {
				t.Errorf("address = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := New(Options{}).address(withIPs()); !errors.Is(err, ErrNoAddress) || err.Error() != `sandbox "sb" has no pod IP yet` {
		t.Errorf("address without a pod IP = %v, want ErrNoAddress naming the Sandbox", err)
	}
	custom := New(Options{Address: func(*agentsv1beta1.Sandbox) (string, error) { return "127.0.0.1:1", nil }})
	if got, _ := custom.address(withIPs("198.18.0.7")); got != "127.0.0.1:1" {
		t.Errorf("address with Options.Address = %q, want the custom one", got)
	}
}

func TestActivity(t *testing.T) {
	f := startSandboxd(t)
	last := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	answer, err := json.Marshal(sandboxd.Activity{LastActivity: last, Processes: 1})
	if err != nil {
		t.Fatal(err)
	}
	declaredBy := func(mutate func(*corev1.PodSpec)) *agentsv1beta1.Sandbox {
		sb := sandbox(f.port)
		mutate(&sb.Spec.PodTemplate.Spec)
		return sb
	}
	sidecar := corev1.Container{Name: "sandboxd", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports: []corev1.ContainerPort{{ContainerPort: int32(f.port)}}}
	tests := []struct {
		name   string
		sb     *agentsv1beta1.Sandbox
		status int
		body   string
		want   *sandboxd.Activity
		asked  bool
		err    string
	}{
		{name: "container declares the port", sb: sandbox(f.port), status: http.StatusOK, body: string(answer),
			want: &sandboxd.Activity{LastActivity: last, Processes: 1}, asked: true},
		{
			name: "sidecar declares the port", status: http.StatusOK, body: string(answer), asked: true,
			sb: declaredBy(func(s *corev1.PodSpec) {
				s.InitContainers, s.Containers = []corev1.Container{sidecar}, []corev1.Container{{Name: "agent"}}
			}),
			want: &sandboxd.Activity{LastActivity: last, Processes: 1},
		},
		{
			name: "an init container that ends first runs no daemon", status: http.StatusOK, body: string(answer),
			sb: declaredBy(func(s *corev1.PodSpec) {
				init := *sidecar.DeepCopy()
				init.RestartPolicy = nil
				s.InitContainers, s.Containers = []corev1.Container{init}, []corev1.Container{{Name: "agent"}}
			}),
		},
		{name: "port not declared", sb: declaredBy(func(s *corev1.PodSpec) { s.Containers[0].Ports = nil }), status: http.StatusOK, body: string(answer)},
		{name: "no pod IP", sb: withoutIPs(sandbox(f.port)), status: http.StatusOK, body: string(answer)},
		{name: "not sandboxd", sb: sandbox(f.port), status: http.StatusNotFound, body: "404 page not found", asked: true},
		{name: "token refused", sb: sandbox(f.port), status: http.StatusUnauthorized, body: "wrong token", asked: true,
			err: "sandboxd refused the control token (sandboxd answered 401 Unauthorized: wrong token); check that Secret sb" + credentials.SandboxSecretSuffix + " holds this Sandbox's tokens"},
		{name: "cannot answer", sb: sandbox(f.port), status: http.StatusServiceUnavailable, body: "shutting down", asked: true,
			err: "GET /v1/activity: sandboxd answered 503 Service Unavailable: shutting down"},
		{name: "malformed", sb: sandbox(f.port), status: http.StatusOK, body: "{", asked: true, err: "GET /v1/activity: malformed answer: unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.answer(tt.status, tt.body)
			before := len(f.requests())
			got, err := f.client().Activity(context.Background(), tt.sb)
			if (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
				t.Fatalf("Activity error = %v, want %q", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Activity (-want +got):\n%s", diff)
			}
			if asked := len(f.requests()) > before; asked != tt.asked {
				t.Errorf("asked sandboxd = %v, want %v", asked, tt.asked)
			}
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		port := closedPort(t)
		got, err := New(Options{Key: testKey, Port: port}).Activity(context.Background(), sandbox(port))
		if got != nil || err != nil {
			t.Errorf("Activity = %v, %v; want nil, nil: a Pod where nothing listens runs no daemon", got, err)
		}
	})
}

func withoutIPs(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	sb.Status.PodIPs = nil
	return sb
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}
