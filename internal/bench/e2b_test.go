package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

const (
	testKey       = "pdk_e2b_test"
	testEnvdToken = "envd-token"
	testID        = "abcdefghij234567abcd"
)

// seen is one request as the server received it, the body read.
type seen struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// frontDoorFake answers the control plane like the front door and hands envd's calls, routed by
// E2b-Sandbox-Id as the front door does, to a real in-process envd that runs real commands. It
// records every request.
type frontDoorFake struct {
	mu       sync.Mutex
	requests []seen
	envd     http.Handler
	killed   map[string]bool
}

func newFrontDoorFake(t *testing.T) (*frontDoorFake, string) {
	t.Helper()
	root, err := pathsafe.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	procs := process.NewManager(0)
	home := map[string]string{"HOME": root.Dir()} // bash -l reads the root's profile, not the machine's
	d := envd.New(envd.Config{Root: root, Procs: procs, AccessToken: testEnvdToken,
		Environ: func(extra map[string]string) []string { return process.MergeEnv(os.Environ(), home, extra) }})
	f := &frontDoorFake{envd: d.Handler(), killed: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		d.Close()
		procs.Shutdown(context.Background())
	})
	return f, srv.URL
}

func (f *frontDoorFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if r.Header.Get(e2b.SandboxIDHeader) != "" {
		f.envd.ServeHTTP(w, r)
		return
	}
	if r.Header.Get(e2b.APIKeyHeader) != testKey {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":401,"message":"invalid API key"}`))
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes":
		w.Header().Set("Server-Timing", `claim;dur=4.5, bound;dur=8, daemon;dur=12;desc="1 refused", probe;dur=2`)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(e2b.Sandbox{SandboxID: testID, TemplateID: "bench", EnvdVersion: e2b.EnvdVersion, EnvdAccessToken: testEnvdToken})
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sandboxes":
		_, _ = w.Write([]byte(`[]`))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/sandboxes/"):
		f.mu.Lock()
		defer f.mu.Unlock()
		id := strings.TrimPrefix(r.URL.Path, "/sandboxes/")
		if f.killed[id] {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":404,"message":"sandbox not found"}`))
			return
		}
		f.killed[id] = true
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

func (f *frontDoorFake) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// unenvelope reads the one enveloped message of a Connect streaming request body.
func unenvelope(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		t.Fatalf("body %q is not one uncompressed Connect envelope", b)
	}
	return b[5:]
}

func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// TestE2BClientSendsWhatTheSDKSends checks the harness's requests against the wire of the e2b SDK
// 2.51.0 (shared/reference/e2b.md §1.2-1.5, which the SDK tests in test/integration/e2b and
// test/e2e/cluster exercise against sandboxd and the front door), and that a real envd serves
// its commands.run.
func TestE2BClientSendsWhatTheSDKSends(t *testing.T) {
	fake, url := newFrontDoorFake(t)
	c := newE2BClient(url, testKey, 1)
	ctx := testCtx(t)

	sb, steps, err := c.createWithSteps(ctx, "bench", map[string]string{"paddock-bench": "ns-1"}, 300)
	if err != nil {
		t.Fatal(err)
	}
	if steps["daemon"] != 12*time.Millisecond || steps[refusedStep] != 1 {
		t.Errorf("create's steps %v, want the answer's Server-Timing (daemon 12 ms, 1 refused)", steps)
	}
	if sb.SandboxID != testID || sb.EnvdAccessToken != testEnvdToken {
		t.Errorf("create returned %+v", sb)
	}
	req := fake.last()
	if req.method != http.MethodPost || req.path != "/v2/sandboxes" {
		t.Errorf("create is %s %s, want POST /v2/sandboxes", req.method, req.path)
	}
	for h, want := range map[string]string{"X-Api-Key": testKey, "Content-Type": "application/json"} {
		if got := req.header.Get(h); got != want {
			t.Errorf("create header %s = %q, want %q", h, got, want)
		}
	}
	jsonEqual(t, "create body", req.body, `{"templateID":"bench","metadata":{"paddock-bench":"ns-1"},"timeout":300}`)

	if err := c.run(ctx, sb, "true"); err != nil {
		t.Fatalf("commands.run('true') against a real envd: %v", err)
	}
	req = fake.last()
	if req.method != http.MethodPost || req.path != "/process.Process/Start" {
		t.Errorf("commands.run is %s %s, want POST /process.Process/Start", req.method, req.path)
	}
	for h, want := range map[string]string{
		"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
		"E2b-Sandbox-Id": testID, "E2b-Sandbox-Port": "49983", "X-Access-Token": testEnvdToken,
		"Keepalive-Ping-Interval": "50", "Authorization": "", "Connect-Content-Encoding": "",
	} {
		if got := req.header.Get(h); got != want {
			t.Errorf("commands.run header %s = %q, want %q", h, got, want)
		}
	}
	if ms, err := strconv.Atoi(req.header.Get("Connect-Timeout-Ms")); err != nil || ms <= 55000 || ms > 60000 {
		t.Errorf("Connect-Timeout-Ms = %q, want commands.run's default of 60000 less the time spent", req.header.Get("Connect-Timeout-Ms"))
	}
	jsonEqual(t, "Process/Start message", unenvelope(t, req.body), `{"process":{"cmd":"/bin/bash","args":["-l","-c","true"]},"stdin":false}`)

	if err := c.list(ctx); err != nil {
		t.Fatal(err)
	}
	if req = fake.last(); req.path != "/v2/sandboxes" || req.query != "limit=1" || req.header.Get("X-Api-Key") != testKey {
		t.Errorf("list is %s %s?%s", req.method, req.path, req.query)
	}
	for i, want := range []bool{true, false} {
		killed, err := c.kill(ctx, testID)
		if err != nil || killed != want {
			t.Errorf("kill %d = %v, %v; want %v (204, then 404 with its code)", i+1, killed, err, want)
		}
	}
	if req = fake.last(); req.method != http.MethodDelete || req.path != "/sandboxes/"+testID {
		t.Errorf("kill is %s %s", req.method, req.path)
	}
}

func TestE2BClientFailures(t *testing.T) {
	_, url := newFrontDoorFake(t)
	ctx := testCtx(t)
	c := newE2BClient(url, testKey, 1)
	sb := e2b.Sandbox{SandboxID: testID, EnvdAccessToken: testEnvdToken}

	if err := c.run(ctx, sb, "exit 3"); err == nil || !strings.Contains(err.Error(), "exited with 3") {
		t.Errorf("commands.run('exit 3') = %v, want an exit code error", err)
	}
	if err := c.run(ctx, e2b.Sandbox{SandboxID: testID, EnvdAccessToken: "wrong"}, "true"); err == nil {
		t.Error("commands.run with a wrong envdAccessToken succeeded")
	}
	var ae *apiError
	_, err := newE2BClient(url, "wrong", 1).create(ctx, "bench", nil, 300)
	if !errors.As(err, &ae) || ae.status != http.StatusUnauthorized || ae.message != "invalid API key" {
		t.Errorf("create with a wrong key = %v, want 401 with the body's message", err)
	}
}

func TestE2BOptionsFromFlags(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--rate=", "--e2b=60", "--e2b-rate=5,20", "--timeout=3m", "--e2b-template=ns/tpl"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []Scenario{
		{Kind: KindE2B, PoolSize: 60, Count: 60, Rate: 5, Timeout: 3 * time.Minute},
		{Kind: KindE2B, PoolSize: 60, Count: 60, Rate: 20, Timeout: 3 * time.Minute},
	}
	if diff := cmp.Diff(want, o.Scenarios()); diff != "" {
		t.Errorf("Scenarios (-want +got):\n%s", diff)
	}
	if got := want[1].Name(); got != "e2b 20/s, 60 creates, pool 60" {
		t.Errorf("Name = %q", got)
	}
	if o.E2B.Template != "ns/tpl" || o.E2B.KeysNamespace != e2b.DefaultAPIKeyNamespace || o.E2B.RouterNamespace != "paddock-system" {
		t.Errorf("E2B target = %+v", o.E2B)
	}
}

// TestE2BRefillOptions: a pool smaller than the creates, and one scenario per idle CPU and rate,
// the pool carrying that idle CPU.
func TestE2BRefillOptions(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--rate=", "--e2b=20", "--e2b-rate=5", "--e2b-pool=3", "--e2b-idle-cpu=,10m", "--timeout=3m"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []Scenario{
		{Kind: KindE2B, PoolSize: 3, Count: 20, Rate: 5, Timeout: 3 * time.Minute},
		{Kind: KindE2B, PoolSize: 3, Count: 20, Rate: 5, Timeout: 3 * time.Minute, IdleCPU: "10m"},
	}
	got := o.Scenarios()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Scenarios (-want +got):\n%s", diff)
	}
	if name := got[1].Name(); name != "e2b 5/s, 20 creates, pool 3, idle cpu 10m" {
		t.Errorf("Name = %q", name)
	}
	if a := e2bPoolObject("ns", got[0]).Annotations; len(a) != 0 {
		t.Errorf("pool without idle CPU carries %v", a)
	}
	pool := e2bPoolObject("ns", got[1])
	if pool.Annotations[extensionsv1beta1.IdleCPUAnnotation] != "10m" || *pool.Spec.Replicas != 3 {
		t.Errorf("pool with idle CPU = %v, %d replicas; want idle-cpu 10m, 3 replicas", pool.Annotations, *pool.Spec.Replicas)
	}
}

// TestE2BExistingPoolOptions: the creates go to the template itself in its namespace, with no
// pool of the harness's, and nothing that would size such a pool is accepted with it.
func TestE2BExistingPoolOptions(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--rate=", "--e2b=100", "--e2b-rate=5", "--e2b-existing-pool", "--timeout=3m"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []Scenario{{Kind: KindE2B, PoolSize: 100, Count: 100, Rate: 5, Timeout: 3 * time.Minute, Namespace: "default", ExistingTemplate: "base"}}
	got := o.Scenarios()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Scenarios (-want +got):\n%s", diff)
	}
	if name := got[0].Name(); name != "e2b 5/s, 100 creates, pool of default/base" {
		t.Errorf("Name = %q", name)
	}
	for _, args := range [][]string{{"--e2b-pool=3"}, {"--e2b-idle-cpu=10m"}, {"--e2b-api-key=k", "--e2b-namespace=team"}} {
		o := NewOptions()
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(append([]string{"--rate=", "--e2b=10", "--e2b-existing-pool"}, args...)); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--e2b-existing-pool uses --e2b-template's own pool") {
			t.Errorf("Validate() with %v = %v, want the existing pool named", args, err)
		}
	}
}

func TestE2BOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		set     func(*Options)
		wantErr string
	}{
		{"negative count", func(o *Options) { o.E2BCreates = -1 }, "--e2b=-1"},
		{"bad rate", func(o *Options) { o.E2BRates = "fast" }, `--e2b-rate="fast"`},
		{"no rate", func(o *Options) { o.E2BRates = "" }, `--e2b-rate=""`},
		{"key without its namespace", func(o *Options) { o.E2B.APIKey = "k" }, "--e2b-api-key and --e2b-namespace go together"},
		{"namespace without a key", func(o *Options) { o.E2B.Namespace = "team" }, "--e2b-api-key and --e2b-namespace go together"},
		{"template without a namespace", func(o *Options) { o.E2B.Template = "base" }, `--e2b-template="base"`},
		{"no keys namespace", func(o *Options) { o.E2B.KeysNamespace = "" }, "--e2b-api-key-namespace is empty"},
		{"no way to find the router", func(o *Options) { o.E2B.RouterNamespace = "" }, "--e2b-api-url is empty"},
		{"negative settle load", func(o *Options) { o.E2B.SettleLoad = -1 }, "--e2b-settle-load=-1"},
		{"negative pool", func(o *Options) { o.E2BPool = -1 }, "--e2b-pool=-1"},
		{"idle CPU not a quantity", func(o *Options) { o.E2BIdleCPU = ",lots" }, `"lots" is not a CPU quantity`},
		{"idle CPU zero", func(o *Options) { o.E2BIdleCPU = "0" }, `"0" is not a CPU quantity above zero`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Rates, o.E2BCreates = "", 10
			tc.set(o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
	t.Run("a given key runs in its namespace", func(t *testing.T) {
		o := NewOptions()
		o.Rates, o.E2BCreates, o.E2B.APIKey, o.E2B.Namespace, o.E2B.APIURL = "", 10, "k", "team", "http://198.18.0.5:3000"
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		if s := o.Scenarios(); len(s) != 2 || s[0].Namespace != "team" {
			t.Errorf("Scenarios = %+v, want two in namespace team", s)
		}
	})
	t.Run("only e2b scenarios run in a given namespace", func(t *testing.T) {
		s := Scenario{Kind: KindWarm, PoolSize: 1, Count: 1, Timeout: time.Second, Namespace: "team"}
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "only an e2b scenario") {
			t.Errorf("Validate() = %v", err)
		}
	})
}

func TestE2BTemplateDropsVolumes(t *testing.T) {
	src := &extensionsv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "base", Namespace: "default", ResourceVersion: "7",
			Annotations: map[string]string{extensionsv1beta1.RuntimeAnnotation: extensionsv1beta1.RuntimeSandboxd}},
		Spec: extensionsv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sandboxd",
				VolumeMounts: []corev1.VolumeMount{{Name: "home", MountPath: "/home/user"}}}}}},
			VolumeClaimTemplates: []agentsv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "home"}}},
		}},
	}
	got := e2bTemplate("bench-ns", src)
	if got.Namespace != "bench-ns" || got.Name != templateName || got.ResourceVersion != "" {
		t.Errorf("template is %s/%s at %q", got.Namespace, got.Name, got.ResourceVersion)
	}
	if got.Annotations[extensionsv1beta1.RuntimeAnnotation] != extensionsv1beta1.RuntimeSandboxd {
		t.Error("the runtime annotation (warm members start locked, served through claim settings) was not kept")
	}
	if len(got.Spec.VolumeClaimTemplates) != 0 || len(got.Spec.PodTemplate.Spec.Containers[0].VolumeMounts) != 0 {
		t.Error("volumes kept")
	}
	if len(src.Spec.VolumeClaimTemplates) != 1 || len(src.Spec.PodTemplate.Spec.Containers[0].VolumeMounts) != 1 {
		t.Error("the source template was changed")
	}
}

func TestE2BResultAndReport(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	s := Scenario{Kind: KindE2B, PoolSize: 4, Count: 4, Rate: 20, Timeout: time.Minute}
	samples := []e2bSample{
		{id: "a", start: 0, create: ms(20), first: ms(30), claimWritten: ms(4), bound: ms(12), claimReady: ms(15), warm: true},
		{id: "b", start: ms(50), create: ms(40), first: ms(60)},
		{id: "", start: ms(100), create: ms(5), createErr: errors.New("503: pool empty")},
		{id: "d", start: ms(150), create: ms(25), runErr: errors.New("expected start event"), warm: true},
	}
	res := e2bResult(s, "http://198.18.0.5:3000", samples)
	res.WritesPerClaim = 3.5
	if res.E2B.Warm != 2 || res.E2B.WarmCreate.N != 1 || res.E2B.WarmCreate.P50 != 0.020 || res.E2B.WarmFirstInstruction.P99 != 0.030 {
		t.Errorf("warm %d, warm create %+v, warm first instruction %+v; want 2 warm (a and d), a's 20 ms and 30 ms only (d's command failed)",
			res.E2B.Warm, res.E2B.WarmCreate, res.E2B.WarmFirstInstruction)
	}
	if res.Ready != 2 || res.Failed != 1 || res.E2B.Created != 3 {
		t.Errorf("ready %d, failed %d, created %d; want 2, 1, 3", res.Ready, res.Failed, res.E2B.Created)
	}
	if res.Latency != res.E2B.Create || res.E2B.Create.N != 3 || res.E2B.Create.P50 != 0.025 || res.E2B.Create.Max != 0.040 {
		t.Errorf("create summary %+v, latency %+v", res.E2B.Create, res.Latency)
	}
	if f := res.E2B.FirstInstruction; f.N != 2 || f.P50 != 0.030 || f.P99 != 0.060 {
		t.Errorf("first instruction summary %+v", f)
	}
	if res.AllReadySeconds != 0.110 {
		t.Errorf("all ready after %v s, want 0.110 (b's start plus its first instruction)", res.AllReadySeconds)
	}
	var warm []bool
	for _, smp := range res.Samples {
		warm = append(warm, smp.Warm)
	}
	if diff := cmp.Diff([]bool{true, false, false, true}, warm); diff != "" {
		t.Errorf("samples' warm flags (-want +got), want a and d (d's create answered, its command failed):\n%s", diff)
	}
	if len(res.Samples) != 4 || res.Samples[2].Name != "create-00002" || !strings.HasPrefix(res.Samples[2].Error, "create: ") || res.Samples[3].Ready {
		t.Errorf("samples %+v", res.Samples)
	}
	want := []string{"create: 503: pool empty", "commands.run('true'): expected start event"}
	if diff := cmp.Diff(want, res.E2B.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	md := Markdown(&Report{Scenarios: []Result{res}})
	for _, line := range []string{
		"| e2b 20/s, 4 creates, pool 4 | 3 of 4 | 2 | 25 ms | 40 ms | 30 ms | 60 ms | 3.5 |",
		"create p50 ≤ 30 ms and p99 ≤ 100 ms; time to first instruction p50 ≤ 40 ms",
		"| e2b 20/s, 4 creates, pool 4 | 4.00 ms (4.00 ms) | 12 ms (12 ms) | 15 ms (15 ms) | 25 ms (40 ms) | 30 ms (60 ms) | 20 ms (20 ms) | 30 ms (30 ms) |",
		"e2b 20/s, 4 creates, pool 4: create: 503: pool empty; commands.run('true'): expected start event.",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("report lacks %q:\n%s", line, md)
		}
	}
	if res.E2B.Steps != nil {
		t.Errorf("steps %+v from samples without the front door's steps", res.E2B.Steps)
	}
	if e2bTable([]Result{{Name: "warm", Kind: KindWarm}}) != "" {
		t.Error("a report without e2b scenarios has an e2b table")
	}
}

func TestSettle(t *testing.T) {
	loads := func(seq ...float64) func() (float64, bool) {
		return func() (float64, bool) {
			l := seq[0]
			if len(seq) > 1 {
				seq = seq[1:]
			}
			return l, true
		}
	}
	ctx := context.Background()
	if ok, l := settle(ctx, 2, time.Hour, time.Millisecond, loads(9, 5, 1.5, 7)); !ok || l != 1.5 {
		t.Errorf("settle on a falling load = %v, %v; want true at 1.5", ok, l)
	}
	if ok, l := settle(ctx, 2, 0, time.Millisecond, loads(9)); ok || l != 9 {
		t.Errorf("settle past its timeout = %v, %v; want false at 9", ok, l)
	}
	if ok, l := settle(ctx, 2, time.Hour, time.Millisecond, func() (float64, bool) { return 0, false }); ok || l != -1 {
		t.Errorf("settle without a load = %v, %v; want false, -1", ok, l)
	}
}

// The warm creates' steps come from the front door's Server-Timing and the first command's
// events; cold creates and failed commands are left out.
func TestE2BSteps(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	steps := func(claim, bound, daemon, probe, refused int) serverSteps {
		return serverSteps{"claim": ms(claim), "bound": ms(bound), "daemon": ms(daemon), "probe": ms(probe), refusedStep: time.Duration(refused)}
	}
	s := Scenario{Kind: KindE2B, PoolSize: 3, Count: 3, Rate: 1, Timeout: time.Minute}
	samples := []e2bSample{
		{id: "a", create: ms(60), first: ms(90), warm: true, steps: steps(10, 20, 30, 4, 1), run: runTimes{started: ms(20), ended: ms(30)}, second: ms(8)},
		{id: "b", create: ms(80), first: ms(120), warm: true, steps: steps(12, 22, 40, 6, 0), run: runTimes{started: ms(25), ended: ms(40)}, second: ms(10)},
		{id: "cold", create: ms(900), first: ms(950), steps: steps(10, 800, 90, 5, 3), run: runTimes{started: ms(30), ended: ms(50)}},
		{id: "failed", create: ms(70), warm: true, steps: steps(10, 20, 30, 4, 9), runErr: errors.New("boom")},
	}
	got := e2bResult(s, "http://198.18.0.5:3000", samples).E2B.Steps
	if got == nil {
		t.Fatal("no steps")
	}
	sum := func(s Summary) [3]float64 { return [3]float64{float64(s.N), s.P50, s.Max} }
	for name, tt := range map[string]struct {
		got  Summary
		want [3]float64
	}{
		"router claim":       {got.RouterClaim, [3]float64{2, 0.010, 0.012}},
		"router bound":       {got.RouterBound, [3]float64{2, 0.020, 0.022}},
		"router daemon":      {got.RouterDaemon, [3]float64{2, 0.030, 0.040}},
		"probe":              {got.Probe, [3]float64{2, 0.004, 0.006}},
		"exec started":       {got.ExecStarted, [3]float64{2, 0.020, 0.025}},
		"exec ended":         {got.ExecEnded, [3]float64{2, 0.010, 0.015}},
		"second instruction": {got.SecondInstruction, [3]float64{2, 0.008, 0.010}},
	} {
		if diff := cmp.Diff(tt.want, sum(tt.got), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("%s (n, p50, max) (-want +got):\n%s", name, diff)
		}
	}
	if got.RefusedProbes != 0.5 {
		t.Errorf("refused probes %v, want the warm creates' mean 0.5", got.RefusedProbes)
	}
	md := Markdown(&Report{Scenarios: []Result{e2bResult(s, "", samples)}})
	if line := "| e2b 1/s, 3 creates, pool 3 | 10 ms (12 ms) | 20 ms (22 ms) | 30 ms (40 ms) | 0.50 | 4.00 ms (6.00 ms) | 20 ms (25 ms) | 10 ms (15 ms) | 8.00 ms (10 ms) |"; !strings.Contains(md, line) {
		t.Errorf("report lacks %q:\n%s", line, md)
	}
}

// TestMarkWarmAndKill: with --e2b-kill-after-command each sandbox is killed once its command ran,
// warm when its claim is bound to a Sandbox of another name (an adopted member), cold when bound
// to its own name or unread; the scenario's later markWarm keeps what was read before the kill.
func TestMarkWarmAndKill(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--rate=", "--e2b=10", "--e2b-kill-after-command"}); err != nil {
		t.Fatal(err)
	}
	if !o.E2B.KillAfterCommand {
		t.Fatal("--e2b-kill-after-command did not set E2BTarget.KillAfterCommand")
	}

	const ns = "bench-ns"
	claim := func(name, bound string) *extensionsv1beta1.SandboxClaim {
		c := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.Status.Sandbox.Name = bound
		return c
	}
	scheme := runtime.NewScheme()
	if err := extensionsv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim("warmclaim", "member-x7k2p"), claim("coldclaim", "coldclaim")).Build()
	r := &Runner{c: c}
	f, url := newFrontDoorFake(t)
	fd := newE2BClient(url, testKey, 1)
	ctx := testCtx(t)

	samples := []e2bSample{{id: "warmclaim"}, {id: "coldclaim"}, {id: "noclaim"}}
	for i := range samples {
		r.markWarmAndKill(ctx, fd, ns, &samples[i])
	}
	got := map[string][2]bool{}
	for _, s := range samples {
		got[s.id] = [2]bool{s.warm, s.warmKnown}
	}
	want := map[string][2]bool{"warmclaim": {true, true}, "coldclaim": {false, true}, "noclaim": {false, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warm, warmKnown by sandbox (-want +got):\n%s", diff)
	}
	f.mu.Lock()
	killed := f.killed
	f.mu.Unlock()
	if diff := cmp.Diff(map[string]bool{"warmclaim": true, "coldclaim": true, "noclaim": true}, killed); diff != "" {
		t.Errorf("killed (-want +got):\n%s", diff)
	}
}
