package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleReport() *Report {
	return &Report{
		Conditions: Conditions{
			Time:          time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC),
			GitCommit:     "abc123",
			GoVersion:     "go1.26.8",
			ServerVersion: "v1.37.2",
			Nodes:         0,
			Objects:       map[string]int{"sandboxes": 3, "pods": 2},
			Note:          "envtest, fsync off",
			LoadAverage:   "0.50 0.40 0.30",
		},
		Scenarios: []Result{
			{
				Name: "warm 5/s", Kind: KindWarm, Count: 2, Rate: 5, PoolSize: 5, Ready: 2,
				Latency:         Summary{N: 2, P50: 0.012, P90: 0.034, P99: 0.034, Max: 0.034},
				AllReadySeconds: 0.234, RefillSeconds: 0.5, RefillComplete: true,
				Writes:         Writes{"POST sandboxclaims.extensions.agents.x-k8s.io": 2, "PATCH sandboxes.agents.x-k8s.io": 4},
				WritesPerClaim: 3,
				Reads:          Writes{"GET sandboxes.agents.x-k8s.io": 2},
				ObjectsBefore:  map[string]int{"nodes": 0, "sandboxes": 8},
				LoadAverage:    "1.20 0.60 0.40",
				Samples: []Sample{
					{Name: "claim-0000", StartSeconds: 0, LatencySeconds: 0.012, Ready: true},
					{Name: "claim-0001", StartSeconds: 0.2, LatencySeconds: 0.034, Ready: true},
				},
			},
			{Name: "cold <none>", Kind: KindCold, Count: 1, Failed: 1, Samples: []Sample{{Name: "sb-0000", Error: "forbidden"}}},
			{
				Name: "hold 3", Kind: KindHold, Count: 3, Ready: 3,
				Latency: Summary{N: 3, P50: 1, P90: 2, P99: 2, Max: 2}, AllReadySeconds: 2.5,
				Hold: &Hold{
					ControllerPod: "ctl-1", Settled: ControllerMetrics{RSSBytes: 100 << 20, CPUSeconds: 12},
					CPUCoresCreating: 0.8, CPUCoresIdle: 0.01, ProcessStartedSeconds: 1.5, PodReadySeconds: 4.5, ProbeReadySeconds: 6,
					ResyncSeconds: 7.25, ResyncComplete: true, AfterResync: ControllerMetrics{RSSBytes: 150 << 20},
					Problems: []string{"metrics slow"},
				},
				Samples: []Sample{{Name: "sb-00000", LatencySeconds: 1, Ready: true}},
			},
			{
				Name: "runtime 100", Kind: KindRuntime, Count: 100, Writes: Writes{},
				ObjectsBefore: map[string]int{"sandboxes": 1},
				Runtime: &Runtime{
					Sandbox: "runtime", PodIP: "198.18.0.9", RouterPod: "router-1",
					Exec:         Summary{N: 100, P50: 0.0009, P90: 0.0012, P99: 0.0016, Max: 0.003},
					ExecRouted:   Summary{N: 100, P50: 0.0011, P90: 0.0014, P99: 0.0019, Max: 0.004},
					Health:       Summary{N: 100, P50: 0.00005, P90: 0.00006, P99: 0.00009, Max: 0.0002},
					HealthRouted: Summary{N: 100, P50: 0.00015, P90: 0.0002, P99: 0.0003, Max: 0.012},
					Load:         Load{Concurrency: 8, Requests: 1000, Seconds: 0.05, PerSecond: 20000, Latency: Summary{N: 1000, P50: 0.0003, P99: 0.0011}},
					LoadRouted:   Load{Concurrency: 8, Requests: 1000, Errors: 2, Seconds: 0.1, PerSecond: 9980, Latency: Summary{N: 998, P50: 0.0008, P99: 0.0025}},
					Problems:     []string{"timeout ran out"},
				},
			},
		},
	}
}

func TestMarkdown(t *testing.T) {
	want := `Measured 2026-11-29T23:00:00Z; commit abc123; go1.26.8; API server v1.37.2; 0 nodes; objects present: 2 pods, 3 sandboxes; harness load average: 0.50 0.40 0.30.
Conditions: envtest, fsync off

| scenario | created | Ready | p50 | p90 | p99 | max | all Ready | API writes per object |
|---|---|---|---|---|---|---|---|---|
| warm 5/s | 2 | 2 | 12 ms | 34 ms | 34 ms | 34 ms | 234 ms | 3.0 |
| cold <none> | 1 | 0 | – | – | – | – | – | 0.0 |
| hold 3 | 3 | 3 | 1000 ms | 2000 ms | 2000 ms | 2000 ms | 2500 ms | 0.0 |

| hold scenario | RSS settled | RSS after resync | CPU while creating | CPU idle | new process started | new Pod Ready | probe Ready | full resync |
|---|---|---|---|---|---|---|---|---|
| hold 3 | 100 MiB | 150 MiB | 0.80 cores | 0.01 cores | 1500 ms | 4500 ms | 6000 ms | 7250 ms |

hold 3 could not measure everything: metrics slow.

Times after the restart run from the delete of the controller's Pod (the process start is on the controller's clock); a new Pod's readiness includes its readiness probe's period; a full resync is when the new process has queued at least as many items as Sandboxes are held and has nothing queued or in flight (workqueue metrics).

| runtime scenario | path | one at a time p50 | p99 | router adds (p50) | requests/s under load | p50 under load | p99 under load | errors |
|---|---|---|---|---|---|---|---|---|
| runtime 100 | exec true (SDK), direct | 900 µs | 1.60 ms | – | – | – | – | – |
| runtime 100 | exec true (SDK), routed | 1.10 ms | 1.90 ms | 200 µs | – | – | – | – |
| runtime 100 | GET /v1/health, direct | 50 µs | 90 µs | – | 20000 | 300 µs | 1.10 ms | 0 |
| runtime 100 | GET /v1/health, routed | 150 µs | 300 µs | 100 µs | 9980 | 800 µs | 2.50 ms | 2 |

runtime 100 could not measure everything: timeout ran out.

The harness sends the runtime requests from the machine it runs on to the sandbox's Pod IP and to the router Pod's IP, with keep-alive connections; each routed round trip follows a direct one. "Router adds" is the routed p50 minus the direct p50. Under load, the clients send the next request as soon as the last one answered.

warm 5/s: objects present before: 0 nodes, 8 sandboxes; load average after: 1.20 0.60 0.40; API writes (total 6):

- PATCH sandboxes.agents.x-k8s.io: 4
- POST sandboxclaims.extensions.agents.x-k8s.io: 2

API reads (GET, LIST) from the first create to the last Ready (total 2):

- GET sandboxes.agents.x-k8s.io: 2
`
	if diff := cmp.Diff(want, Markdown(sampleReport())); diff != "" {
		t.Errorf("Markdown (-want +got):\n%s", diff)
	}
}

func TestWriteJSONRoundTrips(t *testing.T) {
	in := sampleReport()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	var out Report
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(*in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// Field names are the contract with whatever reads the file; pin the ones plots and CI use.
	for _, key := range []string{`"p99Seconds": 0.034`, `"writesPerObject": 3`, `"allReadySeconds": 0.234`, `"latencySeconds": 0.012`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s:\n%s", key, buf.String())
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir() + "/out"
	paths, err := WriteFiles(dir, sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	want := []string{dir + "/percentiles.svg", dir + "/report.json", dir + "/report.md", dir + "/scenario-1.svg", dir + "/scenario-2.svg"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("written files (-want +got):\n%s", diff)
	}
	md, err := os.ReadFile(dir + "/report.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "![warm 5/s](scenario-1.svg)") {
		t.Errorf("report.md does not link the plot:\n%s", md)
	}
	svg, err := os.ReadFile(dir + "/scenario-1.svg")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(parseSVG(t, string(svg)).Points); got != 2 {
		t.Errorf("scenario-1.svg has %d points, want 2", got)
	}
}

// TestMarkdownRuntimeOnly leaves out the table of claims and Sandboxes when no scenario made any.
func TestMarkdownRuntimeOnly(t *testing.T) {
	r := sampleReport()
	r.Scenarios = r.Scenarios[len(r.Scenarios)-1:]
	md := Markdown(r)
	if strings.Contains(md, "| scenario | created |") || !strings.Contains(md, "| runtime scenario | path |") {
		t.Errorf("Markdown of a runtime-only run:\n%s", md)
	}
}
