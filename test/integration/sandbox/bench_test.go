package sandbox

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
)

// BenchmarkSandboxToReady measures a cold Sandbox from create to Ready against the real API
// server, with the test playing kubelet, and reports the reconciler's API writes and passes per
// Sandbox. Run: go test ./test/integration/sandbox/ -run '^$' -bench . -benchtime 50x
// (PADDOCK_SANDBOX_CREDENTIALS=off: without the per-Sandbox credentials Secret).
func BenchmarkSandboxToReady(b *testing.B) {
	ctx, ns := start(b)
	var writes, statusWrites, passes int
	for i := 0; b.Loop(); i++ {
		sb := builder.MakeSandbox(fmt.Sprintf("bench-%d", i), ns).Service(true).Obj()
		create(b, ctx, sb)
		pod := waitPod(b, key(sb), nil)
		if _, err := markReady(ctx, pod); err != nil {
			b.Fatal(err)
		}
		waitSandbox(b, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))
		for _, pass := range ops.Passes(sb) {
			passes++
			for _, op := range pass {
				writes++
				if strings.HasPrefix(op, "status") {
					statusWrites++
				}
			}
		}
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/sandbox")
	b.ReportMetric(float64(statusWrites)/float64(b.N), "status-writes/sandbox")
	b.ReportMetric(float64(passes)/float64(b.N), "passes/sandbox")
}
