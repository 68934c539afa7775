package e2bfrontdoor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/sandboxd/interpreter"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// BenchmarkE2BCreate measures, on envtest with every controller and the stand-in daemon, E2B
// creates at a fixed rate against a pool sized to the run: the create's latency as the SDK sees
// it, and the time to first instruction (create, then one Process/List through the front door's
// data plane). It reports p50 and p99, and the daemon probes each create cost the front door;
// docs/performance/results.md records them. Run:
//
//	go test ./test/integration/e2bfrontdoor/ -run '^$' -bench E2BCreate -benchtime 1x
func BenchmarkE2BCreate(b *testing.B) {
	const creates = 40
	for _, rate := range []int{5, 20} {
		b.Run(fmt.Sprintf("%d/s", rate), func(b *testing.B) {
			for range b.N {
				h := start(b, creates)
				waitPool(b, h, creates)
				probesBefore := probes(b, h)
				create, first := measureCreates(b, h, creates, rate)
				b.ReportMetric((probes(b, h)-probesBefore)/creates, "daemon-probes/create")
				b.ReportMetric(percentile(create, 50), "create-p50-ms")
				b.ReportMetric(percentile(create, 99), "create-p99-ms")
				b.ReportMetric(percentile(first, 50), "first-instruction-p50-ms")
				b.ReportMetric(percentile(first, 99), "first-instruction-p99-ms")
			}
		})
	}
}

func waitPool(b *testing.B, h *harness, n int32) {
	framework.EventuallyWithin(b, 3*framework.DefaultTimeout, func(ctx context.Context) error {
		return poolReady(ctx, h, n)
	})
}

// measureCreates starts one create every 1/rate seconds and returns each create's latency and
// each time to first instruction, in milliseconds.
func measureCreates(b *testing.B, h *harness, n, rate int) (create, first []float64) {
	type sample struct{ create, first time.Duration }
	out := make(chan sample, n)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; i < n; i++ {
		if i > 0 {
			<-tick.C
		}
		go func() {
			start := time.Now()
			r := h.call(b, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": "base"})
			created := time.Since(start)
			if r.status != http.StatusCreated {
				b.Errorf("create: %d %s", r.status, r.body)
				out <- sample{}
				return
			}
			var c struct {
				SandboxID       string `json:"sandboxID"`
				EnvdAccessToken string `json:"envdAccessToken"`
			}
			r.into(b, &c)
			run := h.do(b, http.MethodPost, h.url+e2b.ProbePath, nil, map[string]string{e2b.SandboxIDHeader: c.SandboxID,
				e2b.AccessTokenHeader: c.EnvdAccessToken, "Content-Type": "application/json"}, "")
			if run.status != http.StatusOK {
				b.Errorf("first instruction: %d %s", run.status, run.body)
			}
			out <- sample{created, time.Since(start)}
		}()
	}
	for range n {
		s := <-out
		create = append(create, float64(s.create.Microseconds())/1000)
		first = append(first, float64(s.first.Microseconds())/1000)
	}
	return create, first
}

// probes is the front door's count of daemon probes so far.
func probes(b *testing.B, h *harness) float64 {
	families, err := h.metrics.Gather()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == "sandbox_router_e2b_daemon_probes_total" {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// percentile is the nearest-rank percentile p of xs.
func percentile(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, i-1)]
}

// BenchmarkE2BRunCode measures runCode('1+1') as @e2b/code-interpreter sends it (POST /execute on
// port 49999 with the sandbox token), through the front door's data plane to sandboxd's real code
// interpreter on loopback (Debian's python3, no gVisor): the round trip until end_of_execution,
// p50 and p99. Run:
//
//	go test ./test/integration/e2bfrontdoor/ -run '^$' -bench E2BRunCode -benchtime 500x
func BenchmarkE2BRunCode(b *testing.B) {
	if _, err := os.Stat(sandboxdtest.DebianPython); err != nil {
		b.Fatalf("%s is missing: run hack/install-deps.sh", sandboxdtest.DebianPython)
	}
	srv := interpreter.New(interpreter.Config{Python: sandboxdtest.DebianPython, Dir: b.TempDir(), Environ: os.Environ})
	b.Cleanup(srv.Close)
	// The pod: the create's readiness probe answered as envd does, everything else by the
	// interpreter (the front door dials one address whatever the port).
	mux := http.NewServeMux()
	mux.HandleFunc(e2b.ProbePath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"processes":[]}`) })
	mux.Handle("/", srv.Handler())
	pod := httptest.NewServer(mux)
	b.Cleanup(pod.Close)
	h := startWith(b, 1, pod.Listener.Addr().String())
	waitPool(b, h, 1)
	sbx := h.create(b, "/v2/sandboxes", map[string]any{})
	hdr := map[string]string{e2b.SandboxIDHeader: sbx.SandboxID, e2b.SandboxPortHeader: strconv.Itoa(e2b.InterpreterPort),
		e2b.AccessTokenHeader: sbx.EnvdAccessToken, e2b.TrafficAccessTokenHeader: sbx.TrafficAccessToken, "Content-Type": "application/json"}
	run := func() {
		r := h.do(b, http.MethodPost, h.url+"/execute", strings.NewReader(`{"code":"1+1"}`), hdr, "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"text":"2"`) || !strings.Contains(string(r.body), "end_of_execution") {
			b.Fatalf("runCode('1+1') through the front door: %d %s", r.status, r.body)
		}
	}
	run() // the kernel starts on first use
	took := make([]float64, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		run()
		took = append(took, float64(time.Since(start).Microseconds())/1000)
	}
	b.ReportMetric(percentile(took, 50), "p50-ms")
	b.ReportMetric(percentile(took, 99), "p99-ms")
}
