package manager

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestWarmPoolGauges scrapes the warm pool gauges the dashboard's fill panels plot: desired from
// each pool's spec, held and ready from its status, read at scrape time.
func TestWarmPoolGauges(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	ns := env.Namespace(t)
	full := builder.MakeWarmPool("full", ns, "tpl").Replicas(3).Obj()
	framework.MustCreate(t, ctx, env.Client, full)
	full.Status.Replicas, full.Status.ReadyReplicas = 3, 2
	if err := env.Client.Status().Update(ctx, full); err != nil {
		t.Fatal(err)
	}
	defaulted := builder.MakeWarmPool("defaulted", ns, "tpl").Obj()
	defaulted.Spec.Replicas = nil
	framework.MustCreate(t, ctx, env.Client, defaulted)

	reg := prometheus.NewRegistry()
	o := manager.NewOptions()
	o.Extensions = true
	if err := manager.RegisterMetrics(reg, env.Client, o); err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, m := range []struct {
		name, help      string
		full, defaulted int
	}{
		{"paddock_warmpool_desired_replicas", "Unclaimed Sandboxes a SandboxWarmPool asks for (spec.replicas).", 3, 1},
		{"paddock_warmpool_ready_replicas", "Unclaimed Ready Sandboxes a SandboxWarmPool holds (status.readyReplicas).", 2, 0},
		{"paddock_warmpool_replicas", "Unclaimed Sandboxes a SandboxWarmPool holds (status.replicas).", 3, 0},
	} {
		want += fmt.Sprintf("# HELP %s %s\n# TYPE %s gauge\n%s{namespace=%q,warmpool=\"defaulted\"} %d\n%s{namespace=%q,warmpool=\"full\"} %d\n",
			m.name, m.help, m.name, m.name, ns, m.defaulted, m.name, ns, m.full)
	}
	// Other tests' pools live in other namespaces; compare only this test's series.
	got := &namespaceFilter{Gatherer: reg, namespace: ns}
	if err := testutil.GatherAndCompare(got, strings.NewReader(want),
		"paddock_warmpool_desired_replicas", "paddock_warmpool_replicas", "paddock_warmpool_ready_replicas"); err != nil {
		t.Error(err)
	}

	coreOnly := prometheus.NewRegistry()
	o.Extensions = false
	if err := manager.RegisterMetrics(coreOnly, env.Client, o); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(coreOnly, "paddock_warmpool_desired_replicas"); err != nil || n != 0 {
		t.Errorf("without the extensions the warm pool gauges report %d series (err %v), want none", n, err)
	}
}

// namespaceFilter keeps only the series labelled with one namespace.
type namespaceFilter struct {
	prometheus.Gatherer
	namespace string
}

func (f *namespaceFilter) Gather() ([]*dto.MetricFamily, error) {
	families, err := f.Gatherer.Gather()
	for _, fam := range families {
		var kept []*dto.Metric
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if l.GetName() == "namespace" && l.GetValue() == f.namespace {
					kept = append(kept, m)
				}
			}
		}
		fam.Metric = kept
	}
	return families, err
}
