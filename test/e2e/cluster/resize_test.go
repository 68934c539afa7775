package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/podresize"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// testWarmResize: on the real node, a pool member waits at 10m CPU and 32Mi; a claim asking for
// 300m and 192Mi gets that member, resized in place by the kubelet: same Pod, same container (ID,
// start time, restart count), the new resources in the Pod's status and in the container's
// cgroup. Under runc, and under gVisor.
func testWarmResize(t *testing.T) {
	requireInPlaceResize(t)
	t.Run("runc", func(t *testing.T) { warmResize(t, nil) })
	t.Run("gvisor", func(t *testing.T) {
		requireGVisor(t)
		warmResize(t, ptr(devcluster.GVisorRuntimeClass))
	})
}

func warmResize(t *testing.T, runtimeClass *string) {
	ns := namespace(t)
	ctx := framework.Context(t, 6*time.Minute)
	c := paddockClient(t)
	guaranteed := func(cpu, memory string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	tpl := builder.MakeTemplate("resize", ns).Image(*imageFlag).Command([]string{"sh", "-c", "sleep 3600; : " + marker}).
		Resources(guaranteed("200m", "128Mi")).Obj()
	tpl.Spec.PodTemplate.Spec.RuntimeClassName = runtimeClass
	tpl.Spec.PodTemplate.Spec.TerminationGracePeriodSeconds = ptr[int64](1)
	framework.MustCreate(t, ctx, c, tpl)
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("resize", ns, "resize").Replicas(1).
		Annotation(extensionsv1beta1.IdleCPUAnnotation, "10m").Annotation(extensionsv1beta1.IdleMemoryAnnotation, "32Mi").
		Annotation(extensionsv1beta1.ClaimCPUMaxAnnotation, "1").Annotation(extensionsv1beta1.ClaimMemoryMaxAnnotation, "512Mi").Obj())
	waitPoolReady(t, c, ns, "resize", 1)

	var list agentsv1beta1.SandboxList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{agentsv1beta1.WarmPoolSandboxLabel}); err != nil || len(list.Items) != 1 {
		t.Fatalf("pool members: %v, %v", len(list.Items), err)
	}
	member := list.Items[0].Name
	before := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, before); err != nil {
		t.Fatal(err)
	}
	if got := before.Spec.Containers[0].Resources; !podresize.Equal(got, guaranteed("10m", "32Mi")) {
		t.Fatalf("member Pod waits with %v, want 10m/32Mi", got)
	}
	t.Logf("idle member %s: container's cgroup %s; Pod's cgroup on the node %s", member, cgroupLimits(ctx, ns, member), podCgroupLimits(t, before))

	claim := builder.MakeClaim("big", ns, "resize").
		Annotation(extensionsv1beta1.CPUAnnotation, "300m").Annotation(extensionsv1beta1.MemoryAnnotation, "192Mi").Obj()
	start := time.Now()
	framework.MustCreate(t, ctx, c, claim)
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionResized); cond != nil && cond.Reason == extensionsv1beta1.ClaimReasonResizeFellBack {
			return fmt.Errorf("STOP: the claim fell back to a cold Sandbox: %s", cond.Message)
		}
		if !apimeta.IsStatusConditionTrue(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady) {
			return fmt.Errorf("claim not Ready: %s", builder.FormatConditions(claim.Status.Conditions))
		}
		return nil
	})
	t.Logf("claim Ready %s after its create (resize included)", time.Since(start).Round(time.Millisecond))
	if claim.Status.Sandbox.Name != member {
		t.Fatalf("claim bound to %q, want the member %q", claim.Status.Sandbox.Name, member)
	}
	if err := builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionResized, "True", agentsv1beta1.SandboxReasonResized); err != nil {
		t.Error(err)
	}

	after := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, after); err != nil {
		t.Fatal(err)
	}
	want := guaranteed("300m", "192Mi")
	if after.UID != before.UID {
		t.Errorf("the Pod was replaced: UID %s, was %s", after.UID, before.UID)
	}
	if got := after.Spec.Containers[0].Resources; !podresize.Equal(got, want) {
		t.Errorf("Pod spec asks for %v, want 300m/192Mi", got)
	}
	was, is := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if is.ContainerID != was.ContainerID || is.RestartCount != was.RestartCount || is.State.Running == nil ||
		!is.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) {
		t.Errorf("the container restarted: %s started %v restarts %d, was %s started %v restarts %d",
			is.ContainerID, is.State.Running, is.RestartCount, was.ContainerID, was.State.Running.StartedAt, was.RestartCount)
	}
	if is.Resources == nil || !podresize.Equal(*is.Resources, want) {
		t.Errorf("container status reports %v, want 300m/192Mi", is.Resources)
	}
	limits := cgroupLimits(ctx, ns, member)
	t.Logf("claimed %s: container's cgroup %s", member, limits)
	if want := "cpu.max=30000 100000 memory.max=201326592"; runtimeClass == nil && limits != want {
		t.Errorf("the container's cgroup says %q, want %q", limits, want)
	}
	// The Pod's cgroup on the host: the sum of its containers' limits (one container here) plus
	// the RuntimeClass's memory overhead (gVisor's), 10m/32Mi before the claim; and the node's
	// pids limit per Pod.
	wantMemory := resource.MustParse("192Mi")
	if after.Spec.Overhead != nil {
		wantMemory.Add(after.Spec.Overhead[corev1.ResourceMemory])
	}
	wantPod := fmt.Sprintf("cpu.max=30000 100000 memory.max=%d pids.max=%d", wantMemory.Value(), devcluster.PodPidsLimit)
	if got := podCgroupLimits(t, after); got != wantPod {
		t.Errorf("the Pod's cgroup on the node says %q, want %q", got, wantPod)
	}
}

// requireInPlaceResize skips unless the node's kubelet can resize a Pod in place: kubelet v1.37.2
// without pod-level cgroups (cgroupsPerQOS: false) dereferences a nil pod memory limit in
// doPodResizeAction on the first resize it actuates and the whole kubelet panics, taking every
// Pod of the node with it. The dev node runs with pod-level cgroups (internal/devcluster,
// KubeletCgroupRoot); a cluster given with -cluster-kubeconfig may not.
func requireInPlaceResize(t *testing.T) {
	t.Helper()
	if q := kubeletConfig(t).CgroupsPerQOS; q != nil && !*q {
		t.Skipf("node %s's kubelet runs with cgroupsPerQOS: false; kubelet v1.37.2 panics on an in-place resize without pod-level cgroups (docs/design/warm-resources.md)", devcluster.NodeName)
	}
}

// nodeKubeletConfig is what the tests read of the node's kubelet configuration.
type nodeKubeletConfig struct {
	CgroupsPerQOS *bool  `json:"cgroupsPerQOS"`
	CgroupRoot    string `json:"cgroupRoot"`
	CgroupDriver  string `json:"cgroupDriver"`
}

// kubeletConfig reads the configuration of the dev node's kubelet through its configz endpoint.
func kubeletConfig(t *testing.T) nodeKubeletConfig {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	raw, err := suite.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + devcluster.NodeName + "/proxy/configz").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the kubelet configuration of node %s: %v", devcluster.NodeName, err)
	}
	var configz struct {
		KubeletConfig nodeKubeletConfig `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &configz); err != nil {
		t.Fatalf("decoding the kubelet configuration of node %s: %v", devcluster.NodeName, err)
	}
	return configz.KubeletConfig
}

// cgroupLimitsScript prints a cgroup's CPU and memory limits as cgroup v2 names them, from v2's
// files or v1's (cpu and memory hierarchies): "cpu.max=QUOTA PERIOD memory.max=BYTES", "max"
// for no limit. Its one argument is the cgroup's path below the hierarchies' mounts.
const cgroupLimitsScript = `set -e; d=/sys/fs/cgroup
if [ -f "$d$1/cpu.max" ]; then
  echo "cpu.max=$(cat "$d$1/cpu.max") memory.max=$(cat "$d$1/memory.max")"
else
  q=$(cat "$d/cpu$1/cpu.cfs_quota_us"); [ "$q" = -1 ] && q=max
  m=$(cat "$d/memory$1/memory.limit_in_bytes"); [ "$m" -ge 9223372036854000000 ] 2>/dev/null && m=max
  echo "cpu.max=$q $(cat "$d/cpu$1/cpu.cfs_period_us") memory.max=$m"
fi`

// cgroupLimits reads the CPU and memory limits the container sees in its own cgroup. The script
// always prints a line or fails; an exec that ended without error and without output (seen once
// in a full e2e run, right after the resize) is asked again, a few times.
func cgroupLimits(ctx context.Context, ns, pod string) string {
	for range 3 {
		out, err := execInPod(ctx, ns, pod, "sh", "-c", cgroupLimitsScript, "sh", "")
		if err != nil {
			return fmt.Sprintf("(exec: %v: %s)", err, out)
		}
		if out = strings.Trim(out, " \n\x00"); out != "" {
			return out
		}
	}
	return "(exec: no output, three times)"
}

// podCgroupLimits reads, on this host, the limits of the Pod's own cgroup, which the kubelet
// writes on a resize whatever the runtime: the sum of its containers' limits plus its
// RuntimeClass's overhead. Under gVisor it is the cgroup of runsc's sandbox processes.
func podCgroupLimits(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	kc := kubeletConfig(t)
	if kc.CgroupDriver != "cgroupfs" {
		t.Fatalf("node %s's kubelet uses the %q cgroup driver; the test reads cgroupfs paths", devcluster.NodeName, kc.CgroupDriver)
	}
	dir := path.Join("/", kc.CgroupRoot, "kubepods")
	switch pod.Status.QOSClass {
	case corev1.PodQOSBurstable, corev1.PodQOSBestEffort:
		dir = path.Join(dir, strings.ToLower(string(pod.Status.QOSClass)))
	}
	dir = path.Join(dir, "pod"+string(pod.UID))
	out, err := exec.Command("sh", "-c", cgroupLimitsScript, "sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("reading the limits of cgroup %s on this host (the test runs on the dev node): %v: %s", dir, err, out)
	}
	// The kubelet's podPidsLimit, on the Pod's cgroup: a fork bomb in the sandbox stops there.
	pids, err := os.ReadFile(path.Join("/sys/fs/cgroup/pids", dir, "pids.max"))
	if errors.Is(err, fs.ErrNotExist) {
		pids, err = os.ReadFile(path.Join("/sys/fs/cgroup", dir, "pids.max"))
	}
	if err != nil {
		t.Fatalf("reading the pids limit of cgroup %s on this host: %v", dir, err)
	}
	return strings.TrimSpace(string(out)) + " pids.max=" + strings.TrimSpace(string(pids))
}
