package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// memoryLoop starts, in its own session, a shell that holds a random secret and a counter in
// its variables only and writes both to /var/tmp/mem every second. The file can be removed and
// comes back: only a process that kept running (its memory restored) writes it again, with the
// same secret.
const memoryLoop = `loop='s=$(od -An -N8 -tx1 /dev/urandom | tr -d " \n"); i=0
while :; do i=$((i+1)); echo "$s $i" > /var/tmp/mem.new && mv /var/tmp/mem.new /var/tmp/mem; sleep 1; done'
if command -v setsid >/dev/null; then setsid sh -c "$loop" </dev/null >/dev/null 2>&1 &
else sh -c "$loop" </dev/null >/dev/null 2>&1 & fi`

// testSuspendMemory: a gVisor Sandbox with snapshots.paddock.dev/suspend: memory is suspended
// and resumed through operatingMode; the process it ran goes on in the new Pod with the secret
// and counter it held, MemoryKept says Restored, and the node's image is removed. The same
// annotation under runc comes back cold, MemoryKept False with reason NotGvisor.
func testSuspendMemory(t *testing.T) {
	t.Run("gvisor", func(t *testing.T) {
		requireGVisor(t)
		suspendKeepsMemory(t)
	})
	t.Run("runc comes back cold", suspendMemoryUnderRunc)
	t.Run("e2b: pause and connect with the SDK", func(t *testing.T) {
		requireGVisor(t)
		testE2BPauseKeepsMemory(t)
	})
}

// testE2BPauseKeepsMemory: the unmodified E2B SDK pauses a sandbox of dev up's `base` template,
// which under gVisor carries snapshots.paddock.dev/suspend: memory, while a process of it holds a
// secret in memory; once the checkpoint is made and the Pod gone, connect finds the same process
// running on (its secret, its counter past the paused one) and the file it wrote outside its
// home volume, and MemoryKept says Restored.
func testE2BPauseKeepsMemory(t *testing.T) {
	p := pauseE2B(t, snapshotsv1alpha1.SuspendMemory, "pausememory.mjs", "E2B_MEMORY_LOOP="+memoryLoop)
	ctx, c, ns, dir, env := p.ctx, p.c, p.ns, p.dir, p.env
	if p.devTpl != snapshotsv1alpha1.SuspendMemory {
		t.Errorf("dev up's gVisor E2B template has %s %q, want %q", snapshotsv1alpha1.SuspendAnnotation, p.devTpl, snapshotsv1alpha1.SuspendMemory)
	}
	var res struct {
		SandboxID string `json:"sandboxId"`
		Secret    string `json:"secret"`
		Count     int    `json:"count"`
	}
	if err := json.Unmarshal(p.result, &res); err != nil || res.SandboxID == "" || res.Secret == "" {
		t.Fatalf("pausememory.mjs pause printed %s: %v", p.result, err)
	}
	paused := time.Now()
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.SandboxID}, claim); err != nil {
		t.Fatal(err)
	}
	var list agentsv1beta1.SandboxList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(claim.UID)}); err != nil || len(list.Items) != 1 {
		t.Fatalf("the Sandbox of claim %s: %d found (%v)", claim.Name, len(list.Items), err)
	}
	sb := &list.Items[0]
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns)
			dumpMemoryNodePods(t, sb.UID)
		}
	})
	podName := cmp.Or(sb.Annotations[agentsv1beta1.PodNameAnnotation], sb.Name)
	waitMemoryKept(t, c, sb, agentsv1beta1.SandboxReasonMemoryCheckpointed, agentsv1beta1.SandboxReasonMemoryCheckpointFailed)
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error { return podGone(ctx, c, ns, podName) })
	t.Logf("E2B pause to Pod gone (checkpoint included): %v; %s", time.Since(paused).Round(time.Millisecond), memoryKept(sb).Message)

	start := time.Now()
	if out, err := node(t, ctx, dir, append(env, "E2B_STEP=connect", "E2B_SANDBOX_ID="+res.SandboxID,
		"E2B_SECRET="+res.Secret, "E2B_COUNT="+strconv.Itoa(res.Count)), "pausememory.mjs"); err != nil || !strings.Contains(out, "checks passed") {
		t.Fatalf("pausememory.mjs connect: %v", err)
	}
	t.Logf("E2B connect of the checkpointed sandbox and its checks: %v", time.Since(start).Round(time.Millisecond))
}

func suspendKeepsMemory(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "mem", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj()
	framework.MustCreate(t, ctx, c, sb)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns)
			dumpMemoryNodePods(t, sb.UID)
		}
	})
	run := sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	run("sh", "-c", memoryLoop)
	secret, before := readMemoryLoop(t, run, "", 0)
	image := sandboxPodUID(t, ctx, sb)

	start := time.Now()
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	waitMemoryKept(t, c, sb, agentsv1beta1.SandboxReasonMemoryCheckpointed, agentsv1beta1.SandboxReasonMemoryCheckpointFailed)
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error { return podGone(ctx, c, ns, sb.Name) })
	t.Logf("suspend to Pod gone (checkpoint included): %v; %s", time.Since(start).Round(time.Millisecond), memoryKept(sb).Message)
	dir := filepath.Join(snapshotsv1alpha1.MemoryImageDir, image)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the image of the suspended Pod on the node: %v (mode %v); want directory %s, mode 0700", err, fi, dir)
	}

	start = time.Now()
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	waitMemoryKept(t, c, sb, agentsv1beta1.SandboxReasonMemoryRestored, agentsv1beta1.SandboxReasonMemoryRestoreFailed)
	ip := waitSandboxReady(t, c, sb)
	t.Logf("resume to Ready (restore included): %v", time.Since(start).Round(time.Millisecond))
	resumed, err := suite.client.CoreV1().Pods(ns).Get(ctx, sb.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resumed.Annotations[snapshotsv1alpha1.RestoreFromAnnotation]; got != image {
		t.Errorf("the resumed Pod has restore-from %q, want %q (the suspended Pod's UID)", got, image)
	}

	// The loop goes on in the new Pod: same secret, the counter from where it was; and it
	// writes the file again once removed, so it is running, not only its file kept.
	run = sandboxRunner(t, ctx, c, sb, ip)
	_, after := readMemoryLoop(t, run, secret, before)
	run("rm", "-f", "/var/tmp/mem")
	readMemoryLoop(t, run, secret, after)

	// Resumed: the image is removed from the node.
	framework.EventuallyWithin(t, 2*time.Minute, func(context.Context) error {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("image %s of a resumed Sandbox is still on the node (stat: %v)", dir, err)
		}
		return nil
	})
}

// suspendMemoryUnderRunc: the annotation on a Sandbox without gVisor suspends with volumes only
// and says why; the resumed Pod boots cold (the loop's file is gone with the Pod).
func suspendMemoryUnderRunc(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "cold", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj()
	sb.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, sb)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns)
		}
	})
	run := sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	run("sh", "-c", memoryLoop)
	readMemoryLoop(t, run, "", 0)

	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	waitMemoryKept(t, c, sb, agentsv1beta1.SandboxReasonMemoryNotGvisor, "")
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error { return podGone(ctx, c, ns, sb.Name) })
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	run = sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	if got := run("sh", "-c", "test -e /var/tmp/mem && echo present || echo absent"); got != "absent\n" {
		t.Errorf("/var/tmp/mem after resuming a runc Sandbox: %q, want absent (a cold boot)", got)
	}
	cond := memoryKept(sb)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != agentsv1beta1.SandboxReasonMemoryNotGvisor || !strings.Contains(cond.Message, "runc") {
		t.Errorf("MemoryKept of the resumed runc Sandbox: %+v; want False, NotGvisor, naming runc", cond)
	}
}

// readMemoryLoop waits for memoryLoop's file and returns its secret and counter: the secret
// must be secret (when set) and the counter above above.
func readMemoryLoop(t *testing.T, run func(cmd ...string) string, secret string, above int) (string, int) {
	t.Helper()
	var s string
	var n int
	framework.EventuallyWithin(t, time.Minute, func(context.Context) error {
		out := run("sh", "-c", "cat /var/tmp/mem 2>/dev/null || true")
		f := strings.Fields(out)
		if len(f) != 2 {
			return fmt.Errorf("/var/tmp/mem holds %q; want the loop's secret and counter", out)
		}
		var err error
		if n, err = strconv.Atoi(f[1]); err != nil {
			return fmt.Errorf("/var/tmp/mem holds %q: %w", out, err)
		}
		s = f[0]
		switch {
		case secret != "" && s != secret:
			return fmt.Errorf("the loop's secret is %s, want %s (a fresh process, not the restored one)", s, secret)
		case n <= above:
			return fmt.Errorf("the loop's counter is %d, want above %d", n, above)
		}
		return nil
	})
	return s, n
}

// waitMemoryKept waits for sb's MemoryKept condition to have reason want; fail, when set, is the
// reason that ends the wait at once, with its message.
func waitMemoryKept(t *testing.T, c client.Client, sb *agentsv1beta1.Sandbox, want, fail string) {
	t.Helper()
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		cond := memoryKept(sb)
		switch {
		case cond != nil && fail != "" && cond.Reason == fail:
			return nil // reported below
		case cond == nil || cond.Reason != want:
			return fmt.Errorf("MemoryKept is %+v; want reason %s", cond, want)
		}
		return nil
	})
	if cond := memoryKept(sb); cond.Reason != want {
		t.Fatalf("MemoryKept is %s: %s; want %s", cond.Reason, cond.Message, want)
	}
}

func memoryKept(sb *agentsv1beta1.Sandbox) *metav1.Condition {
	return meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
}

// sandboxPodUID is the UID of sb's current Pod: the name of its memory image.
func sandboxPodUID(t *testing.T, ctx context.Context, sb *agentsv1beta1.Sandbox) string {
	t.Helper()
	name := cmp.Or(sb.Annotations[agentsv1beta1.PodNameAnnotation], sb.Name)
	p, err := suite.client.CoreV1().Pods(sb.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Pod of Sandbox %s: %v (conditions %s)", sb.Name, err, builder.FormatConditions(sb.Status.Conditions))
	}
	return string(p.UID)
}

// dumpMemoryNodePods logs the checkpoint and forget Pods of the Sandbox uid, for a failed run.
func dumpMemoryNodePods(t *testing.T, uid any) {
	ctx := framework.Context(t, 30*time.Second)
	pods, err := suite.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%v", snapshotsv1alpha1.MemorySandboxUIDLabel, uid)})
	if err != nil {
		t.Logf("listing memory node Pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		logs, _ := suite.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		t.Logf("memory node Pod %s/%s (%s): %s\nlogs:\n%s", p.Namespace, p.Name, p.Status.Phase, describe(&p), logs)
	}
}
