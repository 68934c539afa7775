// Package devcluster checks the parts of `paddock dev up` that only talk to the API server, here
// the KWOK fake nodes, against a real kube-apiserver.
package devcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

// TestApplyKWOKNodes brings the fake nodes up, then up again with another count and capacity, as
// `paddock dev up --kwok-nodes --kwok-max-pods` does on an existing cluster.
func TestApplyKWOKNodes(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	nodes := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Nodes()
	// podsPerNode lists the KWOK nodes as name → Pod capacity/allocatable.
	podsPerNode := func() map[string][2]int64 {
		t.Helper()
		list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: devcluster.KWOKNodeLabelKey + "=" + devcluster.KWOKNodeLabelValue})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{}
		for _, n := range list.Items {
			got[n.Name] = [2]int64{n.Status.Capacity.Pods().Value(), n.Status.Allocatable.Pods().Value()}
		}
		return got
	}
	steps := []struct {
		name           string
		count, maxPods int
		wantChanged    bool
		want           map[string][2]int64
	}{
		{"create", 2, devcluster.DefaultKWOKMaxPods, true, map[string][2]int64{"paddock-kwok-0": {110, 110}, "paddock-kwok-1": {110, 110}}},
		{"again, nothing to do", 2, devcluster.DefaultKWOKMaxPods, false, map[string][2]int64{"paddock-kwok-0": {110, 110}, "paddock-kwok-1": {110, 110}}},
		{"more room, one node more", 3, 1000, true, map[string][2]int64{"paddock-kwok-0": {1000, 1000}, "paddock-kwok-1": {1000, 1000}, "paddock-kwok-2": {1000, 1000}}},
		{"fewer nodes", 1, 1000, true, map[string][2]int64{"paddock-kwok-0": {1000, 1000}}},
	}
	for _, s := range steps {
		changed, err := devcluster.ApplyKWOKNodes(ctx, nodes, s.count, s.maxPods)
		if err != nil {
			t.Fatalf("%s: ApplyKWOKNodes(%d, %d) = %v", s.name, s.count, s.maxPods, err)
		}
		if changed != s.wantChanged {
			t.Errorf("%s: ApplyKWOKNodes reported changed=%t, want %t", s.name, changed, s.wantChanged)
		}
		if diff := cmp.Diff(s.want, podsPerNode()); diff != "" {
			t.Errorf("%s: KWOK nodes' Pod capacity and allocatable (-want +got):\n%s", s.name, diff)
		}
	}
}
