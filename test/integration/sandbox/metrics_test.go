package sandbox

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// agent_sandboxes counts the Sandboxes of the API server at scrape time.
func TestSandboxesGauge(t *testing.T) {
	ctx, ns := start(t)
	reg := prometheus.NewRegistry()
	if err := sandboxctrl.RegisterMetrics(reg, env.Client); err != nil {
		t.Fatal(err)
	}
	ready := builder.MakeSandbox("up", ns).Label(agentsv1beta1.LaunchTypeLabel, agentsv1beta1.LaunchTypeWarm).Obj()
	create(t, ctx, ready)
	create(t, ctx, builder.MakeSandbox("down-1", ns).Suspended().Obj())
	create(t, ctx, builder.MakeSandbox("down-2", ns).Suspended().Obj())
	pod := waitPod(t, key(ready), nil)
	if _, err := markReady(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, ready, condition(agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, ""))

	framework.Eventually(t, func(context.Context) error {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "agent_sandboxes" {
				continue
			}
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["namespace"] == ns {
					got[l["ready_condition"]+"/"+l["launch_type"]+"/"+l["owned_by"]] = m.GetGauge().GetValue()
				}
			}
		}
		want := map[string]float64{"true/warm/None": 1, "false/cold/None": 2}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("agent_sandboxes in %s = %v, want %v", ns, got, want)
		}
		return nil
	})
}
