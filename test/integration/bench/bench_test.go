// Package bench runs the benchmark harness of internal/bench against envtest with the real
// controllers in-process and a kubelet stand-in, so the harness can be exercised (and rough
// numbers taken) without a cluster. The test asserts behaviour only: every object Ready, the
// statistics and files produced. Speed is reported, never asserted.
//
// Bigger measurements by hand, for example:
//
//	go test ./test/integration/bench/ -run TestScenarios -v -timeout 20m \
//	  -args -bench.pool=20 -bench.claims=40 -bench.rates=5,20 -bench.cold=100 -bench.out=/tmp/bench
package bench

import (
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	poolSize = flag.Int("bench.pool", 5, "warm pool replicas")
	claims   = flag.Int("bench.claims", 10, "claims per warm scenario")
	rates    = flag.String("bench.rates", "20,0", "comma-separated claim rates per second; burst or 0 creates all claims at once; empty skips warm scenarios")
	cold     = flag.Int("bench.cold", 10, "Sandboxes created at once in the cold scenario; 0 skips it")
	out      = flag.String("bench.out", "", "directory for report.json, report.md and the plots (default: a temporary one)")
	workers  = flag.Int("bench.kubelet-workers", 4, "parallel Pod status writers of the kubelet stand-in")
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

// startControllers runs every controller as paddock-controller --extensions would, in-process,
// until the test ends.
func startControllers(t *testing.T) {
	t.Helper()
	// Controller logs at V(1) and above stay quiet; errors still show.
	ctrl.SetLogger(klog.NewKlogr().V(1))
	stop, err := framework.StartControllers(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

func scenarios(t *testing.T) []bench.Scenario {
	t.Helper()
	rates, err := bench.ParseRates(*rates)
	if err != nil {
		t.Fatalf("-bench.rates: %v", err)
	}
	var out []bench.Scenario
	for _, rate := range rates {
		out = append(out, bench.Scenario{Kind: bench.KindWarm, PoolSize: *poolSize, Count: *claims, Rate: rate,
			Timeout: 2 * time.Minute, RefillWindow: 30 * time.Second})
	}
	if *cold > 0 {
		out = append(out, bench.Scenario{Kind: bench.KindCold, Count: *cold, Timeout: 2 * time.Minute})
	}
	return out
}

func gitCommit() string {
	b, err := exec.Command("git", "-C", framework.RepoRoot(), "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func TestScenarios(t *testing.T) {
	startControllers(t)
	kubelet, err := startKubeletStandIn(env.Config, env.Client, *workers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.stop)

	runner, err := bench.NewRunner(env.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := framework.Context(t, 30*time.Minute)
	conds, err := runner.Conditions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conds.GitCommit = gitCommit()
	conds.Note = "envtest (kube-apiserver + etcd with --unsafe-no-fsync), controllers in-process through internal/manager, " +
		"kubelet stand-in marking Pods Ready, no nodes; harness, controllers and control plane share one machine"
	report := &bench.Report{Conditions: conds}
	for _, s := range scenarios(t) {
		res, err := runner.Run(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		checkResult(t, s, res)
		report.Scenarios = append(report.Scenarios, res)
	}

	dir := *out
	if dir == "" {
		dir = t.TempDir()
	}
	paths, err := bench.WriteFiles(dir, report)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s\n%s", strings.Join(paths, ", "), bench.Markdown(report))
}

// checkResult asserts what must hold however fast the machine is.
func checkResult(t *testing.T, s bench.Scenario, res bench.Result) {
	t.Helper()
	var problems []string
	if res.Ready != s.Count || res.Failed != 0 {
		problems = append(problems, fmt.Sprintf("%d of %d Ready, %d failed", res.Ready, s.Count, res.Failed))
	}
	if res.Latency.N != s.Count || len(res.Samples) != s.Count {
		problems = append(problems, fmt.Sprintf("%d latencies and %d samples, want %d each", res.Latency.N, len(res.Samples), s.Count))
	}
	if !(res.Latency.P50 > 0 && res.Latency.P50 <= res.Latency.P99 && res.Latency.P99 <= res.Latency.Max && res.Latency.Max <= res.AllReadySeconds) {
		problems = append(problems, fmt.Sprintf("inconsistent statistics %+v, all Ready after %gs", res.Latency, res.AllReadySeconds))
	}
	// Every claim or Sandbox is at least one POST the harness itself made.
	if res.WritesPerClaim < 1 {
		problems = append(problems, fmt.Sprintf("%.1f API writes per object, want at least the create itself", res.WritesPerClaim))
	}
	if s.Kind == bench.KindWarm && !res.RefillComplete {
		problems = append(problems, "the pool did not refill within the refill window")
	}
	if len(problems) > 0 {
		t.Errorf("%s: %s", s.Name(), strings.Join(problems, "; "))
	}
}
