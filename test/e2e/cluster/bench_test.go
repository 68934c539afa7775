package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/test/framework"
)

// testBenchRuntime runs the benchmark harness's runtime scenario, small, against the real node's
// sandboxd and the router dev up installs: the harness must find both through the API and reach
// them by Pod IP, as make bench does. Numbers are logged, never asserted.
func testBenchRuntime(t *testing.T) {
	ctx := framework.Context(t, 5*time.Minute)
	runner, err := bench.NewRunner(suite.restConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	s := bench.Scenario{Kind: bench.KindRuntime, Count: 50, LoadRequests: 500, Concurrency: 8, Timeout: 3 * time.Minute}
	res, err := runner.Run(ctx, s)
	if err != nil {
		t.Fatalf("runtime scenario: %v", err)
	}
	m := res.Runtime
	var problems []string
	problems = append(problems, m.Problems...)
	for name, sum := range map[string]bench.Summary{"exec": m.Exec, "routed exec": m.ExecRouted, "health": m.Health, "routed health": m.HealthRouted} {
		if sum.N != s.Count {
			problems = append(problems, name+" has too few samples")
		}
	}
	for name, l := range map[string]bench.Load{"direct load": m.Load, "routed load": m.LoadRouted} {
		if l.Requests != s.LoadRequests || l.Errors != 0 {
			problems = append(problems, name+" did not send every request without error")
		}
	}
	if len(problems) > 0 {
		t.Errorf("runtime scenario on the dev cluster: %s", strings.Join(problems, "; "))
	}
	t.Logf("\n%s", bench.Markdown(&bench.Report{Scenarios: []bench.Result{res}}))
}
