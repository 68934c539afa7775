package snapshots

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// RuntimeClasses of the memory tests: gVisor's handler, and runc's.
const (
	gvisorClass = "gvisor-memory-test"
	runcClass   = "runc-memory-test"
)

// memorySandbox is a Sandbox that keeps its memory, running under runtimeClass with a memory
// limit of 256 MiB (the image's cap, with gVisor's overhead).
func memorySandbox(t *testing.T, ns, runtimeClass string) *agentsv1beta1.Sandbox {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	for name, handler := range map[string]string{gvisorClass: "runsc", runcClass: "runc"} {
		if err := env.Client.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ensureNode(t, nodeName)
	sb := builder.MakeSandbox("sb", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj()
	sb.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To(runtimeClass)
	sb.Spec.PodTemplate.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	return sb
}

// ensureNode creates the Node name (the controller checks that a checkpoint's node is still there).
func ensureNode(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(framework.Context(t, framework.DefaultTimeout), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitMemoryKept waits for the Sandbox's MemoryKept condition at status and reason, with a
// message containing every one of want.
func waitMemoryKept(t *testing.T, ns string, status metav1.ConditionStatus, reason string, want ...string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		sb, err := get(ctx, ns, "sb", &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept, status, reason); err != nil {
			return err
		}
		for _, c := range sb.Status.Conditions {
			for _, w := range want {
				if c.Type == agentsv1beta1.SandboxConditionMemoryKept && !strings.Contains(c.Message, w) {
					return fmt.Errorf("MemoryKept message %q does not contain %q", c.Message, w)
				}
			}
		}
		return nil
	})
}

// nodePod waits for the memory node Pod doing op on image and returns it.
func nodePod(t *testing.T, op, image string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		pod, err = get(ctx, captureNamespace, "memory-"+op+"-"+image, &corev1.Pod{})
		return err
	})
	return pod
}

// finishNodePod plays a node Pod's end: phase, and msg in its termination message.
func finishNodePod(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase, msg string) {
	t.Helper()
	code := int32(0)
	if phase == corev1.PodFailed {
		code = 1
	}
	_, err := framework.UpdatePodStatus(framework.Context(t, framework.DefaultTimeout), env.Client, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) {
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memory", Image: testCaptureImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	})
	if err != nil {
		t.Fatalf("finishing node Pod %s: %v", pod.Name, err)
	}
}

// suspendToCheckpoint suspends the running Sandbox and returns the name of the image its
// checkpoint will write (the running Pod's UID) and the checkpoint node Pod the controller made.
func suspendToCheckpoint(t *testing.T, ns string) (string, *corev1.Pod) {
	t.Helper()
	pod, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	image := string(pod.UID)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	return image, nodePod(t, snapshotsv1alpha1.MemoryOpCheckpoint, image)
}

// checkpointedSuspension suspends the running Sandbox and plays its checkpoint to Succeeded: it
// checks the checkpoint Pod is made, on the Pod's node, while the Pod stays, and returns the
// image's name (the suspended Pod's UID).
func checkpointedSuspension(t *testing.T, ns string) string {
	t.Helper()
	image, cp := suspendToCheckpoint(t, ns)
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryCheckpointing, cp.Name, nodeName)
	podStays(t, ns, image) // not deleted before its memory is on the node
	checkNodePod(t, cp, ns, nodeName)
	wantArgs := []string{"checkpoint", "--container-id=" + containerID, "--name=" + image, "--namespace=" + ns,
		"--dir=" + snapshotsv1alpha1.MemoryImageDir, fmt.Sprintf("--max-bytes=%d", (256+64)<<20), "--runsc=" + testRunsc}
	for _, a := range wantArgs {
		if !slices.Contains(cp.Spec.Containers[0].Args, a) {
			t.Errorf("checkpoint Pod args %q lack %q", cp.Spec.Containers[0].Args, a)
		}
	}
	if !cp.Spec.HostPID {
		t.Error("checkpoint Pod without the node's PID namespace: runsc cannot reach the sandbox")
	}
	finishNodePod(t, cp, corev1.PodSucceeded, "image of 3145728 bytes written in 62ms")
	waitMemoryKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryCheckpointed, "3145728 bytes", nodeName)
	removePod(t, ns, image)
	return image
}

// checkNodePod checks what every memory node Pod must be: on node, in the controller's
// namespace, privileged, without a service account token, the image directory mounted.
func checkNodePod(t *testing.T, p *corev1.Pod, ns, node string) {
	t.Helper()
	switch {
	case p.Namespace != captureNamespace || p.Spec.NodeName != node:
		t.Errorf("node Pod %s/%s on node %q, want namespace %s, node %s", p.Namespace, p.Name, p.Spec.NodeName, captureNamespace, node)
	case p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken:
		t.Errorf("node Pod %s mounts a service account token", p.Name)
	case p.Labels[snapshotsv1alpha1.MemorySandboxUIDLabel] == "" || p.Annotations[snapshotsv1alpha1.MemorySandboxNamespaceAnnotation] != ns:
		t.Errorf("node Pod %s labels %v annotations %v: want the Sandbox's", p.Name, p.Labels, p.Annotations)
	}
	found := false
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == snapshotsv1alpha1.MemoryImageDir {
			found = true
		}
	}
	if !found {
		t.Errorf("node Pod %s does not mount %s", p.Name, snapshotsv1alpha1.MemoryImageDir)
	}
}

// restoringPod waits for the resumed Sandbox's Pod and checks it restores image on node.
func restoringPod(t *testing.T, ns, image, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		if pod, err = get(ctx, ns, "sb", &corev1.Pod{}); err != nil {
			return err
		}
		if string(pod.UID) == image || !pod.DeletionTimestamp.IsZero() {
			return fmt.Errorf("pod sb is still the suspended one")
		}
		return nil
	})
	if got := pod.Annotations[snapshotsv1alpha1.RestoreFromAnnotation]; got != image {
		t.Errorf("the resumed Pod has restore-from %q, want %q", got, image)
	}
	if !pinnedTo(pod, node) {
		t.Errorf("the resumed Pod is not pinned to node %s: affinity %+v", node, pod.Spec.Affinity)
	}
	return pod
}

func pinnedTo(pod *corev1.Pod, node string) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		ok := false
		for _, f := range term.MatchFields {
			ok = ok || (f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && slices.Equal(f.Values, []string{node}))
		}
		if !ok {
			return false
		}
	}
	return len(terms) > 0
}

// coldPod waits for a Pod of the Sandbox other than skip (a UID) and checks it boots cold.
func coldPod(t *testing.T, ns string, skip ...string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		pod, err := get(ctx, ns, "sb", &corev1.Pod{})
		if err != nil {
			return err
		}
		if slices.Contains(skip, string(pod.UID)) {
			return fmt.Errorf("pod sb is still %s", pod.UID)
		}
		if v, ok := pod.Annotations[snapshotsv1alpha1.RestoreFromAnnotation]; ok || pinnedTo(pod, nodeName) {
			return fmt.Errorf("pod sb restores %q (pinned: %v), want a cold Pod", v, pinnedTo(pod, nodeName))
		}
		return nil
	})
}

// nodePodsGone waits for both node Pods of image to be deleted.
func nodePodsGone(t *testing.T, image string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		for _, op := range []string{snapshotsv1alpha1.MemoryOpCheckpoint, snapshotsv1alpha1.MemoryOpForget} {
			if err := goneOrTerminating(ctx, captureNamespace, "memory-"+op+"-"+image); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestSuspendKeepsMemory: a gVisor Sandbox annotated suspend: memory is checkpointed on its node
// before its Pod is deleted; the next Pod is pinned to that node and restores the image; once it
// is Ready the image is removed from the node and the node Pods go.
func TestSuspendKeepsMemory(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, gvisorClass))
	waitMemoryKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRunning, "checkpointed when the Sandbox is suspended")

	image := checkpointedSuspension(t, ns)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	pod := restoringPod(t, ns, image, nodeName)
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoring, pod.Name, image)

	playNode(t, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: ns}})
	waitMemoryKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRestored, image)
	forget := nodePod(t, snapshotsv1alpha1.MemoryOpForget, image)
	checkNodePod(t, forget, ns, nodeName)
	if !slices.Contains(forget.Spec.Containers[0].Args, "--name="+image) {
		t.Errorf("forget Pod args %q do not name image %s", forget.Spec.Containers[0].Args, image)
	}
	finishNodePod(t, forget, corev1.PodSucceeded, "")
	nodePodsGone(t, image)
	// The restored Pod keeps running; the condition still says what it is.
	podStays(t, ns, string(pod.UID))
	waitMemoryKept(t, ns, metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRestored, image)
}

// TestMemoryCapWithoutLimit: a Pod without a memory limit is checkpointed with the default cap
// (2 GiB), not with none nor a zero one.
func TestMemoryCapWithoutLimit(t *testing.T) {
	ns := env.Namespace(t)
	sb := memorySandbox(t, ns, gvisorClass)
	sb.Spec.PodTemplate.Spec.Containers[0].Resources.Limits = nil
	runSandbox(t, sb)
	pod, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	cp := nodePod(t, snapshotsv1alpha1.MemoryOpCheckpoint, string(pod.UID))
	if want := fmt.Sprintf("--max-bytes=%d", 2<<30); !slices.Contains(cp.Spec.Containers[0].Args, want) {
		t.Errorf("checkpoint Pod args %q lack %q", cp.Spec.Containers[0].Args, want)
	}
}

// TestMemoryRestoreFailureBootsCold: the node refuses the restore (the shim's error comes back
// as StartError): the Pod is deleted, the condition names the cause, the image is removed, and the
// next Pod boots cold, unpinned.
func TestMemoryRestoreFailureBootsCold(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, gvisorClass))
	image := checkpointedSuspension(t, ns)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	pod := restoringPod(t, ns, image, nodeName)

	framework.Eventually(t, func(ctx context.Context) error {
		if pod.Spec.NodeName == "" {
			if err := framework.BindPod(ctx, env.Client, pod, nodeName); err != nil && !apierrors.IsConflict(err) {
				return err
			}
		}
		_, err := framework.UpdatePodStatus(ctx, env.Client, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: builder.DefaultImage,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "StartError",
					Message: `paddock restore: checkpoint image: lstat /var/lib/paddock/memory/` + image + `: no such file or directory`}}}}
		})
		return err
	})
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoreFailed, "StartError", "no such file or directory", "boots cold")
	nodePod(t, snapshotsv1alpha1.MemoryOpForget, image)
	removePod(t, ns, string(pod.UID))
	coldPod(t, ns, string(pod.UID), image)
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoreFailed, "StartError")
}

// TestMemoryCheckpointFailedSuspendsCold: a checkpoint that fails does not keep the Pod: the
// Sandbox suspends as without the annotation, the condition carries the node's error, what the
// checkpoint may have left is removed, and the next Pod boots cold.
func TestMemoryCheckpointFailedSuspendsCold(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, gvisorClass))
	image, cp := suspendToCheckpoint(t, ns)
	finishNodePod(t, cp, corev1.PodFailed, "the image is 900000000 bytes, above this checkpoint's cap of 335544320 bytes (the Pod's memory limit); it was removed")
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryCheckpointFailed, "above this checkpoint's cap", "volumes only")
	removePod(t, ns, image)
	finishNodePod(t, nodePod(t, snapshotsv1alpha1.MemoryOpForget, image), corev1.PodSucceeded, "")
	nodePodsGone(t, image)
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	coldPod(t, ns, image)
}

// TestMemoryUnderRuncSuspendsCold: the same annotation on a Sandbox that runs under runc makes
// no checkpoint Pod: the Pod goes at once, the condition names the runtime, the next Pod is cold.
func TestMemoryUnderRuncSuspendsCold(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, runcClass))
	pod, err := get(framework.Context(t, framework.DefaultTimeout), ns, "sb", &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeSuspended)
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNotGvisor, runcClass, `handler "runc"`)
	removePod(t, ns, string(pod.UID))
	if _, err := get(framework.Context(t, framework.DefaultTimeout), captureNamespace, "memory-checkpoint-"+string(pod.UID), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("a checkpoint Pod was made for a runc Sandbox (get error %v)", err)
	}
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	coldPod(t, ns, string(pod.UID))
}

// TestMemoryNodeGoneBootsCold: the node that holds the image is gone when the Sandbox resumes:
// the Pod boots cold elsewhere, and the record of the image goes.
func TestMemoryNodeGoneBootsCold(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, gvisorClass))
	image := checkpointedSuspension(t, ns)
	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ensureNode(t, nodeName) })
	setMode(t, ns, agentsv1beta1.SandboxOperatingModeRunning)
	coldPod(t, ns, image)
	waitMemoryKept(t, ns, metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNodeGone, nodeName, "boots cold")
	nodePodsGone(t, image)
}

// TestMemoryImageRemovedWithSandbox: deleting a suspended Sandbox removes its image from the
// node (its records are in the controller's namespace, out of garbage collection's reach).
func TestMemoryImageRemovedWithSandbox(t *testing.T) {
	ns := env.Namespace(t)
	runSandbox(t, memorySandbox(t, ns, gvisorClass))
	image := checkpointedSuspension(t, ns)
	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	finishNodePod(t, nodePod(t, snapshotsv1alpha1.MemoryOpForget, image), corev1.PodSucceeded, "")
	nodePodsGone(t, image)
}

// coreControllerIdentity is a ServiceAccount bound to the Sandbox controller's generated
// ClusterRole (config/rbac/core/role.yaml), as the install binds paddock-controller.
func coreControllerIdentity(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
	return boundIdentity(t, ctx, ns, "core")
}

// TestRestoreFromOnlyByTheController: a Pod carrying restore-from starts as a restore of a
// sandbox's memory (its tokens included), so a namespace user who may create Pods cannot create
// one with it nor add it to one, and is told why; the Sandbox controller's ClusterRole can. The
// suspend: memory annotation needs the same rights as rootfs.
func TestRestoreFromOnlyByTheController(t *testing.T) {
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	ns := env.Namespace(t)
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "restore-from-policy.yaml", ns)
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "suspend-rootfs-policy.yaml", ns)
	grant(t, ctx, ns, "editor", "editor", rbacv1PodsAndSandboxes()...)
	editor := as(t, "editor")
	controller := as(t, coreControllerIdentity(t, ctx, ns))

	restoring := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{snapshotsv1alpha1.RestoreFromAnnotation: "0c5a4b6e-1111-2222-3333-444455556666"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: builder.DefaultImage}}}}
	}
	want := "editor may not: it needs the verb restore on memoryimages.snapshots.paddock.dev cluster-wide"
	framework.Eventually(t, func(ctx context.Context) error {
		err := editor.Create(ctx, restoring("thief"))
		if err == nil {
			_ = env.Client.Delete(ctx, restoring("thief"))
			return fmt.Errorf("a Pod with restore-from admitted from the editor")
		}
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("refused with %q, want it to contain %q", err, want)
		}
		return nil
	})
	plain := restoring("plain")
	plain.Annotations = nil
	if err := editor.Create(ctx, plain); err != nil {
		t.Fatalf("creating a Pod without restore-from as the editor: %v", err)
	}
	err := editor.Patch(ctx, plain.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"snapshots.paddock.dev/restore-from":"other"}}}`)))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("adding restore-from to a Pod as the editor: %v, want refused naming the permission", err)
	}
	if err := controller.Create(ctx, restoring("by-controller")); err != nil {
		t.Errorf("creating a Pod with restore-from as the Sandbox controller's ServiceAccount: %v", err)
	}
	// suspend: memory needs create on sandboxsnapshots, as rootfs does.
	err = editor.Create(ctx, builder.MakeSandbox("mem", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj())
	if err == nil || !strings.Contains(err.Error(), "editor may not: it needs create on sandboxsnapshots.snapshots.paddock.dev") {
		t.Errorf("creating a Sandbox with suspend: memory as the editor: %v, want refused naming the permission", err)
	}
}
