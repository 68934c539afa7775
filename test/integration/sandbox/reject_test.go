package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	sandboxctrl "github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// outOfMemory is what the kubelet wrote on a gVisor Pod it refused at admission on the dev
// node (benchmark of 2026-12-03).
const outOfMemory = "Pod was rejected: Node didn't have enough resource: memory, requested: 134217728, used: 25232932864, capacity: 25276071936"

// rejectAtAdmission binds the Pod to a node, as the scheduler does, and fails it with reason and
// message before any container started, as the kubelet's admission does.
func rejectAtAdmission(t testing.TB, ctx context.Context, pod *corev1.Pod, reason, message string) {
	t.Helper()
	if pod.Spec.NodeName == "" {
		if err := framework.BindPod(ctx, env.Client, pod, "node-a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := framework.UpdatePodStatus(ctx, env.Client, key(pod), func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, reason, message
	}); err != nil {
		t.Fatal(err)
	}
}

// replacedPod waits for the Sandbox's Pod to be another than old, and returns it.
func replacedPod(t testing.TB, sb *agentsv1beta1.Sandbox, old *corev1.Pod) *corev1.Pod {
	t.Helper()
	return waitPod(t, key(sb), func(p *corev1.Pod) error {
		if p.UID == old.UID {
			return fmt.Errorf("still pod %s (uid %s, phase %s)", p.Name, p.UID, p.Status.Phase)
		}
		return nil
	})
}

// A Pod the kubelet rejected at admission, no container started, is not the Sandbox's end: it is
// deleted, a Warning event says why, Ready says a new Pod follows, and the new Pod comes.
func TestPodRejectedAtAdmissionIsReplaced(t *testing.T) {
	ctx, ns := start(t)
	reg := prometheus.NewRegistry()
	if err := sandboxctrl.RegisterMetrics(reg, env.Client); err != nil {
		t.Fatal(err)
	}
	before := rejections(t, reg)
	sb := builder.MakeSandbox("bounced", ns).Obj()
	create(t, ctx, sb)
	first := waitPod(t, key(sb), nil)
	rejectAtAdmission(t, ctx, first, "OutOfmemory", outOfMemory)

	second := replacedPod(t, sb, first)
	// A node that refuses again: the run of rejections continues with the next Pod.
	rejectAtAdmission(t, ctx, second, "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
	third := replacedPod(t, sb, second)
	if _, err := framework.MarkPodReady(ctx, env.Client, key(third)); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, ready(metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady))

	// While it waited, Ready named the rejection and the Pod to come; Finished was never set.
	var rejected []string
	for _, st := range ops.WrittenStatuses(sb) {
		if f := meta.FindStatusCondition(st.Conditions, agentsv1beta1.SandboxConditionFinished); f != nil {
			t.Errorf("a status with Finished %s/%s was written; a rejected Pod is not the Sandbox's end", f.Status, f.Reason)
		}
		if r := meta.FindStatusCondition(st.Conditions, agentsv1beta1.SandboxConditionReady); r != nil && r.Reason == agentsv1beta1.SandboxReasonPodRejected {
			rejected = append(rejected, r.Message)
		}
	}
	want := []string{
		`Pod "bounced" was rejected at admission by node "node-a" (OutOfmemory: ` + outOfMemory + `); a new Pod follows at `,
		`Pod "bounced" was rejected at admission by node "node-a" (NodeAffinity: Pod was rejected: Predicate NodeAffinity failed: `,
	}
	if len(rejected) != len(want) {
		t.Fatalf("Ready=PodRejected written %d times (%q), want once per rejection (%d)", len(rejected), rejected, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(rejected[i], want[i]) || !strings.HasSuffix(rejected[i], fmt.Sprintf("(rejections in a row: %d)", i+1)) {
			t.Errorf("Ready message of rejection %d = %q, want it to start %q and count %d in a row", i+1, rejected[i], want[i], i+1)
		}
	}

	// One Warning event per rejected Pod, with the kubelet's reason and message.
	framework.Eventually(t, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		found := map[string]bool{}
		for _, e := range list.Items {
			if e.Reason == agentsv1beta1.SandboxReasonPodRejected && e.Type == corev1.EventTypeWarning && e.Regarding.Name == sb.Name && e.Related != nil {
				note, _, _ := strings.Cut(e.Note, ";")
				found[string(e.Related.UID)+" "+note] = true
			}
		}
		for _, w := range []string{
			string(first.UID) + ` Node "node-a" rejected pod "bounced" at admission (OutOfmemory: ` + outOfMemory + `)`,
			string(second.UID) + ` Node "node-a" rejected pod "bounced" at admission (NodeAffinity: Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector)`,
		} {
			if !found[w] {
				return fmt.Errorf("no PodRejected event %q among %v", w, found)
			}
		}
		return nil
	})
	if n := recorder.Count(ns, agentsv1beta1.SandboxReasonPodRejected); n != 2 {
		t.Errorf("%d PodRejected events, want 2 (one per rejected Pod)", n)
	}
	after := rejections(t, reg)
	for _, reason := range []string{"OutOfmemory", "NodeAffinity"} {
		if n := after[reason] - before[reason]; n != 1 {
			t.Errorf("paddock_sandbox_pod_rejections_total{reason=%q} rose by %v, want 1 (one rejected Pod)", reason, n)
		}
	}
}

// rejections reads paddock_sandbox_pod_rejections_total by reason.
func rejections(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "paddock_sandbox_pod_rejections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// A Pod whose container ran and that then failed is the Sandbox's end, as upstream has it, even
// with a reason the kubelet's admission uses: it is reported, never replaced.
func TestPodFailedAfterItRanIsNotReplaced(t *testing.T) {
	ctx, ns := start(t)
	sb := builder.MakeSandbox("ran", ns).Obj()
	pod := runOnNode(t, ctx, sb)
	if _, err := framework.UpdatePodStatus(ctx, env.Client, key(pod), func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "OutOfmemory", outOfMemory
		framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
				StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
	}); err != nil {
		t.Fatal(err)
	}
	waitSandbox(t, sb, all(ready(metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodFailed),
		condition(agentsv1beta1.SandboxConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed)))
	nextCompletedPass(t, ctx, sb)
	if got := waitPod(t, key(sb), nil); got.UID != pod.UID || !got.DeletionTimestamp.IsZero() {
		t.Errorf("failed pod was replaced or deleted (uid %s→%s, deletionTimestamp %v)", pod.UID, got.UID, got.DeletionTimestamp)
	}
	if n := recorder.Count(ns, agentsv1beta1.SandboxReasonPodRejected); n != 0 {
		t.Errorf("%d PodRejected events for a pod that ran, want none", n)
	}
}
