package cluster

import (
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/framework"
)

// interpreterRoundTrips is how many runCode('1+1') calls the test times after its checks, and
// interpreterFirstResults how many more creates it times to their first runCode result, each on
// a freshly ready pool member (the figures are logged for docs/performance, never asserted).
const (
	interpreterRoundTrips   = 50
	interpreterFirstResults = 5
)

// testCodeInterpreter runs the unmodified @e2b/code-interpreter SDK through the router's E2B front
// door against the `code-interpreter-v1` template paddock dev up made (the code-interpreter image
// under gVisor, sandboxd serving the interpreter on 49999), copied into the test's namespace with
// a pool of one: state kept between calls, a pandas table, matplotlib's first import using the
// image's font cache, a chart whose PNG has the figure's size, a timeout that interrupts the cell
// and keeps the state, JavaScript and bash.
func testCodeInterpreter(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)

	var dev extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: e2b.InterpreterTemplate}, &dev); err != nil {
		t.Fatalf("the code-interpreter template of paddock dev up: %v", err)
	}
	ctr := dev.Spec.PodTemplate.Spec.Containers[0]
	if !strings.Contains(ctr.Image, "/paddock/code-interpreter:") || !slices.Contains(ctr.Args, fmt.Sprintf("--interpreter-port=%d", e2b.InterpreterPort)) {
		t.Fatalf("paddock dev up's %s template runs %s with %v; want the code-interpreter image with --interpreter-port=%d", e2b.InterpreterTemplate, ctr.Image, ctr.Args, e2b.InterpreterPort)
	}
	if rc := dev.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("paddock dev up's %s template has RuntimeClass %v; want %s", e2b.InterpreterTemplate, rc, devcluster.GVisorRuntimeClass)
	}
	copyDevTemplate(t, ctx, c, e2b.InterpreterTemplate, ns, e2b.InterpreterTemplate, true)
	framework.MustCreate(t, ctx, c, poolOf(ns, e2b.InterpreterTemplate, 1))

	key, url := e2bAPIKey(t, ctx, c, ns), e2bURL(t, ctx, c)
	dir := framework.NodePackage(t, filepath.Join(framework.RepoRoot(), "test", "integration", "interpreter", "client"))
	waitPoolReady(t, c, ns, e2b.InterpreterTemplate, 1)
	chart := filepath.Join(t.TempDir(), "chart.png")
	env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key,
		fmt.Sprintf("ROUND_TRIPS=%d", interpreterRoundTrips), "PNG_OUT="+chart)
	out, err := node(t, ctx, dir, env, "cluster.mjs")
	if err != nil || strings.Contains(out, "FAIL") {
		t.Fatalf("@e2b/code-interpreter through the front door: %v", err)
	}
	// The 600x400 figure's PNG decodes whole; bbox_inches='tight' cuts the canvas to what is
	// drawn and pads it by 0.1 in.
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the chart's PNG does not decode: %v", err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w < 480 || w > 620 || h < 320 || h > 420 {
		t.Errorf("the chart's PNG is %dx%d; want about 600x400", w, h)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var timings struct {
		CreateToFirstResultMs float64   `json:"createToFirstResultMs"`
		RoundTripMs           []float64 `json:"roundTripMs"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &timings); err != nil || len(timings.RoundTripMs) != interpreterRoundTrips {
		t.Fatalf("cluster.mjs's timings line %q: %v", lines[len(lines)-1], err)
	}
	rt := timings.RoundTripMs
	sort.Float64s(rt)
	first := []float64{timings.CreateToFirstResultMs}
	for range interpreterFirstResults {
		waitPoolReady(t, c, ns, e2b.InterpreterTemplate, 1)
		out, err := node(t, ctx, dir, env, "first.mjs")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var sample struct {
			CreateToFirstResultMs float64 `json:"createToFirstResultMs"`
		}
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &sample) != nil {
			t.Fatalf("first.mjs: %v", err)
		}
		first = append(first, sample.CreateToFirstResultMs)
	}
	sort.Float64s(first)
	t.Logf("create (warm pool, gVisor) to the first runCode result: p50 %.0f ms of %d %v; runCode('1+1') through the router: p50 %.1f ms, p99 %.1f ms of %d",
		first[len(first)/2], len(first), first, rt[len(rt)/2], rt[len(rt)*99/100], len(rt))
}
