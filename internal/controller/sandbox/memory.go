package sandbox

// Suspend that keeps memory (docs/design/snapshots.md, "Memory"): a Sandbox annotated
// snapshots.paddock.dev/suspend: memory whose Pod runs under gVisor has its sandbox checkpointed
// on its node (a privileged node Pod in the controller's namespace runs runsc checkpoint) before
// its Pod is deleted; its next Pod is pinned to that node and carries restore-from, so that
// Paddock's runsc shim restores it and every process continues. Whatever fails, the Sandbox comes
// back cold (volumes only) and MemoryKept says why.
//
// The state is in the cluster, read every pass: the node Pods labelled with the Sandbox's UID. A
// Succeeded checkpoint Pod is the record of its image (on its node, named after the Pod it
// checkpointed) until a forget Pod has removed that image; the records live in the controller's
// namespace, where no Sandbox owner can write, so nobody can point a Sandbox at another image.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kube"
	"github.com/paddock-dev/paddock/internal/naming"
)

// stepMemory labels errors of the memory checkpoints.
const stepMemory = "memory"

// MemoryOptions configure the suspend that keeps memory.
type MemoryOptions struct {
	// Namespace is where the node Pods run (the controller's own namespace, as capture Pods).
	Namespace string
	// Image runs `paddock-snapshot checkpoint` and `paddock-snapshot forget` (the capture image).
	Image string
	// Runsc is the nodes' runsc binary; RunscRoot its state directory for containerd's CRI
	// namespace (capture.DefaultRunscRoot when empty).
	Runsc, RunscRoot string
	// DefaultMaxBytes caps the image of a Pod whose containers do not all have a memory limit;
	// otherwise the cap is the sum of the limits plus MemoryImageOverhead.
	DefaultMaxBytes int64
	// RestoreTimeout is how long a restoring Pod may take to be Ready before it is replaced by a
	// cold one (a restore the node refuses leaves the Pod in ContainerCreating).
	RestoreTimeout time.Duration
	// CheckpointTimeout bounds a checkpoint Pod (activeDeadlineSeconds).
	CheckpointTimeout time.Duration
}

// Defaults of MemoryOptions.
const (
	DefaultMemoryImageMaxBytes = 2 << 30
	// MemoryImageOverhead is added to the Pod's memory limit for gVisor's own state in the image.
	MemoryImageOverhead      = 64 << 20
	DefaultRestoreTimeout    = 2 * time.Minute
	DefaultCheckpointTimeout = 5 * time.Minute
	defaultRunscRoot         = "/run/containerd/runsc/k8s.io"
	forgetTimeout            = 2 * time.Minute
	// runscHandler is gVisor's CRI runtime handler: a RuntimeClass with it runs Pods in runsc.
	runscHandler = "runsc"
)

// unavailable says why memory cannot be kept on this cluster; "" when it can.
func (o MemoryOptions) unavailable() string {
	switch {
	case o.Image == "":
		return "no capture image is configured (start the controller with --snapshot-capture-image)"
	case o.Runsc == "":
		return "the nodes' runsc is not configured (start the controller with --snapshot-runsc)"
	}
	return ""
}

// memoryObservation is what a pass saw of a Sandbox that keeps its memory.
type memoryObservation struct {
	// on is set when the Sandbox asks for it; the condition exists only then.
	on          bool
	unavailable bool
	// checkpoints and forgets are the Sandbox's node Pods, by image name.
	checkpoints, forgets map[string]*corev1.Pod
	// hold is set while the Pod of a suspended Sandbox must stay: its checkpoint runs.
	hold bool
	// requeue is when a restoring Pod's deadline passes.
	requeue time.Duration
	// status, reason and message are the MemoryKept condition; empty reason: keep what it says.
	status          metav1.ConditionStatus
	reason, message string
}

func (m *memoryObservation) set(status metav1.ConditionStatus, reason, format string, args ...any) {
	m.status, m.reason, m.message = status, reason, fmt.Sprintf(format, args...)
}

// keepsMemory reports whether sb asks to keep its memory across suspensions.
func keepsMemory(sb *agentsv1beta1.Sandbox) bool {
	return sb.Annotations[snapshotsv1alpha1.SuspendAnnotation] == snapshotsv1alpha1.SuspendMemory
}

// observeMemory lists the node Pods of a Sandbox that keeps its memory.
func (r *Reconciler) observeMemory(ctx context.Context, sb *agentsv1beta1.Sandbox, obs *observation) error {
	m := &obs.memory
	if !keepsMemory(sb) {
		return nil
	}
	m.on = true
	if why := r.opts.Memory.unavailable(); why != "" {
		m.unavailable = true
		m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNotConfigured,
			"memory is not kept: %s; the Sandbox suspends with its volumes only", why)
		return nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(r.opts.Memory.Namespace),
		client.MatchingLabels{snapshotsv1alpha1.MemorySandboxUIDLabel: string(sb.UID)}); err != nil {
		return fmt.Errorf("listing the memory checkpoints of sandbox %q: %w", sb.Name, err)
	}
	m.checkpoints, m.forgets = map[string]*corev1.Pod{}, map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch p.Labels[snapshotsv1alpha1.MemoryOpLabel] {
		case snapshotsv1alpha1.MemoryOpCheckpoint:
			m.checkpoints[p.Labels[snapshotsv1alpha1.MemoryImageLabel]] = p
		case snapshotsv1alpha1.MemoryOpForget:
			m.forgets[p.Labels[snapshotsv1alpha1.MemoryImageLabel]] = p
		}
	}
	return nil
}

// holdForCheckpoint decides whether the owned Pod of a suspended Sandbox that keeps its memory
// must stay: while its checkpoint runs. A checkpoint that cannot be made or fails lets the Pod
// go, as without the annotation: the Sandbox then comes back cold.
func (r *Reconciler) holdForCheckpoint(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) error {
	m := &obs.memory
	if !m.on || m.unavailable || pod == nil || kube.OwnershipOf(pod, sb.UID) != kube.OwnedByUs || !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	image := string(pod.UID)
	cp := m.checkpoints[image]
	if cp == nil {
		if m.forgets[image] != nil {
			return nil // its failed checkpoint is being removed; the reason was set then
		}
		container := rootfsContainer(sb)
		s := containerStatus(pod, container)
		if s == nil || s.State.Running == nil || s.ContainerID == "" {
			m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNotCheckpointed,
				"Pod %s had no running container %q to checkpoint; the next Pod boots cold, with the Sandbox's volumes", pod.Name, container)
			return nil
		}
		if ok, why, err := r.runsGvisor(ctx, sb); err != nil {
			m.hold = true // retried: the answer decides whether the memory is lost
			return err
		} else if !ok {
			m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNotGvisor,
				"memory is not kept: %s, and only gVisor (RuntimeClass handler %q) can checkpoint a running sandbox; the Sandbox suspends with its volumes only", why, runscHandler)
			return nil
		}
		if pod.Spec.NodeName == "" {
			m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNotCheckpointed, "Pod %s is on no node; nothing to checkpoint", pod.Name)
			return nil
		}
		m.hold = true
		m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryCheckpointing,
			"node Pod %s/%s checkpoints Pod %s on node %s before it is deleted", r.opts.Memory.Namespace, memoryPodName(snapshotsv1alpha1.MemoryOpCheckpoint, image), pod.Name, pod.Spec.NodeName)
		return r.createCheckpoint(ctx, sb, pod, trimContainerID(s.ContainerID))
	}
	switch cp.Status.Phase {
	case corev1.PodSucceeded:
		m.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryCheckpointed,
			"Pod %s was checkpointed on node %s (%s); the next Pod runs there and continues its memory", pod.Name, cp.Spec.NodeName, nodePodMessage(cp))
		return nil
	case corev1.PodFailed:
		m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryCheckpointFailed,
			"the checkpoint of Pod %s failed (%s); the Sandbox suspends with its volumes only and its next Pod boots cold", pod.Name, nodePodMessage(cp))
		return r.forgetImage(ctx, sb, cp, m)
	}
	m.hold = true
	m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryCheckpointing,
		"node Pod %s/%s checkpoints Pod %s on node %s before it is deleted", cp.Namespace, cp.Name, pod.Name, cp.Spec.NodeName)
	return nil
}

// runsGvisor reports whether sb's Pods run under runsc, and if not, why.
func (r *Reconciler) runsGvisor(ctx context.Context, sb *agentsv1beta1.Sandbox) (bool, string, error) {
	name := ptr.Deref(sb.Spec.PodTemplate.Spec.RuntimeClassName, "")
	if name == "" {
		return false, "the pod template names no runtimeClassName (the node's default runtime, runc)", nil
	}
	var rc nodev1.RuntimeClass
	err := r.reader().Get(ctx, client.ObjectKey{Name: name}, &rc)
	switch {
	case apierrors.IsNotFound(err):
		return false, fmt.Sprintf("RuntimeClass %q does not exist", name), nil
	case err != nil:
		return false, "", fmt.Errorf("reading RuntimeClass %q to know whether sandbox %q runs under gVisor: %w", name, sb.Name, err)
	case rc.Handler != runscHandler:
		return false, fmt.Sprintf("RuntimeClass %q runs handler %q", name, rc.Handler), nil
	}
	return true, "", nil
}

func trimContainerID(id string) string {
	if _, after, found := strings.Cut(id, "://"); found {
		return after
	}
	return id
}

// memoryPodName is the node Pod doing op on image.
func memoryPodName(op, image string) string { return "memory-" + op + "-" + image }

// imageCap is the largest image kept for sb's Pod: its containers' memory limits (plus gVisor's
// overhead), or the default when a container has none.
func (r *Reconciler) imageCap(sb *agentsv1beta1.Sandbox) int64 {
	var total int64
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		limit, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return r.opts.Memory.defaultMaxBytes()
		}
		total += limit.Value()
	}
	return total + MemoryImageOverhead
}

// createCheckpoint creates the node Pod that checkpoints pod's sandbox.
func (r *Reconciler) createCheckpoint(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, containerID string) error {
	mo := r.opts.Memory
	image := string(pod.UID)
	args := []string{"checkpoint",
		"--runsc=" + mo.Runsc,
		"--runsc-root=" + mo.runscRoot(),
		"--container-id=" + containerID,
		"--dir=" + snapshotsv1alpha1.MemoryImageDir,
		"--name=" + image,
		"--namespace=" + sb.Namespace,
		"--max-bytes=" + strconv.FormatInt(r.imageCap(sb), 10),
	}
	np := r.memoryNodePod(sb, snapshotsv1alpha1.MemoryOpCheckpoint, image, pod.Spec.NodeName, args, mo.checkpointTimeout())
	// runsc reaches the sandbox through the node's PID and network namespaces, and its state.
	np.Spec.HostPID = true
	hostPath(np, "runsc", mo.Runsc, corev1.HostPathFile, true)
	hostPath(np, "runsc-state", filepath.Dir(mo.runscRoot()), corev1.HostPathDirectory, false)
	err := r.create(ctx, np, "memory checkpoint pod "+np.Name)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating node Pod %s/%s to checkpoint the memory of sandbox %q: %w", np.Namespace, np.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Checkpointing the memory before suspending", "checkpoint", klog.KObj(np), "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
	return nil
}

func (o MemoryOptions) runscRoot() string {
	if o.RunscRoot != "" {
		return o.RunscRoot
	}
	return defaultRunscRoot
}

// defaultMaxBytes is DefaultMaxBytes, or DefaultMemoryImageMaxBytes when unset: a zero cap
// would fail every checkpoint of a Pod without memory limits.
func (o MemoryOptions) defaultMaxBytes() int64 {
	if o.DefaultMaxBytes > 0 {
		return o.DefaultMaxBytes
	}
	return DefaultMemoryImageMaxBytes
}

func (o MemoryOptions) checkpointTimeout() time.Duration {
	if o.CheckpointTimeout > 0 {
		return o.CheckpointTimeout
	}
	return DefaultCheckpointTimeout
}

func (o MemoryOptions) restoreTimeout() time.Duration {
	if o.RestoreTimeout > 0 {
		return o.RestoreTimeout
	}
	return DefaultRestoreTimeout
}

// memoryNodePod is a privileged Pod on node running the capture image with args, the image
// directory mounted, no service account token and no ports.
func (r *Reconciler) memoryNodePod(sb *agentsv1beta1.Sandbox, op, image, node string, args []string, deadline time.Duration) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      memoryPodName(op, image),
			Namespace: r.opts.Memory.Namespace,
			Labels: map[string]string{
				snapshotsv1alpha1.MemorySandboxUIDLabel: string(sb.UID),
				snapshotsv1alpha1.MemoryImageLabel:      image,
				snapshotsv1alpha1.MemoryOpLabel:         op,
				// Seen by a cache scoped to Sandboxes' children (--cache-label-selectors).
				agentsv1beta1.SandboxNameHashLabel: naming.NameHash(sb.Name),
				"app.kubernetes.io/name":           "paddock-memory-" + op,
			},
			Annotations: map[string]string{
				snapshotsv1alpha1.MemorySandboxNamespaceAnnotation: sb.Namespace,
				snapshotsv1alpha1.MemorySandboxNameAnnotation:      sb.Name,
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			HostNetwork:                  true,
			ActiveDeadlineSeconds:        ptr.To(int64(deadline.Seconds())),
			// The sandbox's node may be tainted for sandboxes; the node Pod must run there anyway.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:                     "memory",
				Image:                    r.opts.Memory.Image,
				Args:                     args,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
		},
	}
	hostPath(pod, "images", snapshotsv1alpha1.MemoryImageDir, corev1.HostPathDirectoryOrCreate, false)
	return pod
}

func hostPath(pod *corev1.Pod, name, path string, typ corev1.HostPathType, readOnly bool) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(typ)},
	}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: readOnly})
}

// nodePodMessage is what a finished node Pod wrote to its termination message.
func nodePodMessage(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil && t.Message != "" {
			return t.Message
		}
	}
	if p.Status.Message != "" {
		return p.Status.Reason + ": " + p.Status.Message
	}
	return "no message"
}

// forgetImage creates the node Pod that removes cp's image. A node that is gone took the image
// with it: the record goes at once.
func (r *Reconciler) forgetImage(ctx context.Context, sb *agentsv1beta1.Sandbox, cp *corev1.Pod, m *memoryObservation) error {
	image := cp.Labels[snapshotsv1alpha1.MemoryImageLabel]
	if m.forgets[image] != nil {
		return nil
	}
	if gone, err := r.nodeGone(ctx, cp.Spec.NodeName); err != nil {
		return err
	} else if gone {
		return r.deleteNodePods(ctx, cp)
	}
	fp := r.memoryNodePod(sb, snapshotsv1alpha1.MemoryOpForget, image, cp.Spec.NodeName,
		[]string{"forget", "--dir=" + snapshotsv1alpha1.MemoryImageDir, "--name=" + image}, forgetTimeout)
	err := r.create(ctx, fp, "memory forget pod "+fp.Name)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		return fmt.Errorf("creating node Pod %s/%s to remove memory image %s of sandbox %q: %w", fp.Namespace, fp.Name, image, sb.Name, err)
	default:
		ctrl.LoggerFrom(ctx).V(2).Info("Removing a memory image", "forget", klog.KObj(fp), "node", cp.Spec.NodeName)
	}
	m.forgets[image] = fp
	return nil
}

func (r *Reconciler) nodeGone(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	err := r.reader().Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading node %q of a memory image: %w", name, err)
	}
	return false, nil
}

// deleteNodePods deletes pods in order and stops at the first error. A checkpoint goes before
// its forget: a pass that saw the record without its forget would remove the image again.
func (r *Reconciler) deleteNodePods(ctx context.Context, pods ...*corev1.Pod) error {
	for _, p := range pods {
		if p == nil {
			continue
		}
		if err := r.client.Delete(ctx, p, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting memory node Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// usableImage is the newest Succeeded checkpoint of the Sandbox whose image is not being
// removed; nil when there is none.
func (m *memoryObservation) usableImage() *corev1.Pod {
	var best *corev1.Pod
	for image, cp := range m.checkpoints {
		if cp.Status.Phase != corev1.PodSucceeded || m.forgets[image] != nil || !cp.DeletionTimestamp.IsZero() {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&cp.CreationTimestamp) ||
			(best.CreationTimestamp.Equal(&cp.CreationTimestamp) && best.Name < cp.Name) {
			best = cp
		}
	}
	return best
}

// failureReasons keeps MemoryKept as it is on a Pod that boots cold after them.
var failureReasons = []string{
	agentsv1beta1.SandboxReasonMemoryCheckpointFailed, agentsv1beta1.SandboxReasonMemoryNotCheckpointed,
	agentsv1beta1.SandboxReasonMemoryNotGvisor, agentsv1beta1.SandboxReasonMemoryRestoreFailed,
	agentsv1beta1.SandboxReasonMemoryNodeGone, agentsv1beta1.SandboxReasonMemoryNotConfigured,
}

// resumeMemory pins the Pod about to be created to the node of the Sandbox's checkpoint and has
// it restore the image there. No checkpoint, or its node gone: the Pod boots cold.
func (r *Reconciler) resumeMemory(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, m *memoryObservation) error {
	if !m.on || m.unavailable {
		return nil
	}
	cp := m.usableImage()
	if cp == nil {
		if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept); c == nil || !slices.Contains(failureReasons, c.Reason) {
			m.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRunning,
				"Pod %s boots cold; its memory is checkpointed when the Sandbox is suspended", pod.Name)
		}
		return nil
	}
	node := cp.Spec.NodeName
	gone, err := r.nodeGone(ctx, node)
	if err != nil {
		return err
	}
	if gone {
		m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryNodeGone,
			"node %s, which held the memory image of the suspended Pod, is gone; Pod %s boots cold, with the Sandbox's volumes", node, pod.Name)
		return r.deleteNodePods(ctx, cp)
	}
	image := cp.Labels[snapshotsv1alpha1.MemoryImageLabel]
	pinToNode(&pod.Spec, node)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[snapshotsv1alpha1.RestoreFromAnnotation] = image
	m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoring,
		"Pod %s restores memory image %s on node %s", pod.Name, image, node)
	return nil
}

// pinToNode adds a required node affinity to node (by name) to every term of the Pod's own.
func pinToNode(spec *corev1.PodSpec, node string) {
	field := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchFields = append(terms[i].MatchFields, field)
	}
}

// watchRestore follows a running Sandbox's Pod that restores memory: once Ready its image is
// removed from the node; if the restore fails (or a restored container stops, which the shim
// cannot restart in place) the Pod is deleted, and the next one boots cold. It reports whether
// it deleted the Pod.
func (r *Reconciler) watchRestore(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, obs *observation) (bool, error) {
	m := &obs.memory
	if !m.on || m.unavailable || pod == nil || kube.OwnershipOf(pod, sb.UID) != kube.OwnedByUs || !pod.DeletionTimestamp.IsZero() {
		return false, nil
	}
	image := pod.Annotations[snapshotsv1alpha1.RestoreFromAnnotation]
	if image == "" {
		// A cold Pod: whatever a checkpoint of it was doing (woken mid-suspension), it runs on.
		if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept); c == nil ||
			c.Reason == agentsv1beta1.SandboxReasonMemoryCheckpointing || c.Reason == agentsv1beta1.SandboxReasonMemoryCheckpointed {
			m.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRunning,
				"Pod %s runs; its memory is checkpointed when the Sandbox is suspended", pod.Name)
		}
		return false, nil
	}
	cp := m.checkpoints[image]
	confirming := cp != nil && m.forgets[image] == nil
	cause := restoreFailure(pod)
	if cause == "" && confirming && !podConditionTrue(pod, corev1.PodReady) {
		left := r.opts.Memory.restoreTimeout() - r.opts.Clock.Since(pod.CreationTimestamp.Time)
		if left > 0 {
			m.requeue = left
			m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoring,
				"Pod %s restores memory image %s on node %s", pod.Name, image, cp.Spec.NodeName)
			return false, nil
		}
		cause = fmt.Sprintf("not Ready %s after it was created; `kubectl describe pod %s` shows the node's answer (events of paddock restore)", r.opts.Memory.restoreTimeout(), pod.Name)
	}
	if cause != "" {
		if err := r.client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting pod %q whose memory restore failed: %w", pod.Name, err)
		}
		m.set(metav1.ConditionFalse, agentsv1beta1.SandboxReasonMemoryRestoreFailed,
			"Pod %s, started from memory image %s, %s; it was deleted and the next Pod boots cold, with the Sandbox's volumes", pod.Name, image, cause)
		ctrl.LoggerFrom(ctx).Info("Memory restore failed; replacing the Pod by a cold one", "pod", klog.KObj(pod), "cause", cause)
		if cp != nil {
			return true, r.forgetImage(ctx, sb, cp, m)
		}
		return true, nil
	}
	if confirming {
		m.set(metav1.ConditionTrue, agentsv1beta1.SandboxReasonMemoryRestored,
			"Pod %s continues the memory of the suspended Pod (image %s on node %s, now removed)", pod.Name, image, cp.Spec.NodeName)
		return false, r.forgetImage(ctx, sb, cp, m)
	}
	return false, nil
}

// restoreFailure says how a restoring or restored Pod failed; "" when it did not.
func restoreFailure(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("failed (%s: %s)", pod.Status.Reason, pod.Status.Message)
	}
	for _, s := range pod.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil && slices.Contains(restoreErrors, s.State.Waiting.Reason):
			return fmt.Sprintf("could not start container %s (%s: %s)", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			return fmt.Sprintf("stopped container %s (%s, exit code %d: %s)", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
		case s.RestartCount > 0:
			return fmt.Sprintf("restarted container %s, which the shim cannot do in a restored sandbox", s.Name)
		}
	}
	return ""
}

// restoreErrors are the kubelet's waiting reasons of a container the runtime refused.
var restoreErrors = []string{"StartError", "RunContainerError", "CreateContainerError", "CrashLoopBackOff"}

// cleanMemory removes what no Pod will restore from: images being forgotten once their forget Pod
// finished (both node Pods go), failed checkpoints, and Succeeded ones that are not the newest or
// that a running Pod moved on from.
func (r *Reconciler) cleanMemory(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, m *memoryObservation) error {
	if !m.on || m.unavailable {
		return nil
	}
	var errs []error
	for image, fp := range m.forgets {
		if fp.Status.Phase == corev1.PodSucceeded || fp.Status.Phase == corev1.PodFailed {
			if fp.Status.Phase == corev1.PodFailed {
				ctrl.LoggerFrom(ctx).Info("Removing a memory image failed; it stays on the node until the node's image directory is cleaned", "forget", klog.KObj(fp), "message", nodePodMessage(fp))
			}
			errs = append(errs, r.deleteNodePods(ctx, m.checkpoints[image], fp))
		}
	}
	keep := ""
	if usable := m.usableImage(); usable != nil {
		keep = usable.Labels[snapshotsv1alpha1.MemoryImageLabel]
	}
	running := pod != nil && pod.DeletionTimestamp.IsZero() && !suspended(sb)
	for image, cp := range m.checkpoints {
		if m.forgets[image] != nil || !cp.DeletionTimestamp.IsZero() {
			continue
		}
		stale := false
		switch cp.Status.Phase {
		case corev1.PodFailed:
			stale = true
		case corev1.PodSucceeded:
			// While running, only the image the Pod restores from is kept (until it is Ready).
			stale = image != keep || (running && pod.Annotations[snapshotsv1alpha1.RestoreFromAnnotation] != image)
		}
		if stale {
			errs = append(errs, r.forgetImage(ctx, sb, cp, m))
		}
	}
	return errors.Join(errs...)
}

// setMemoryKept sets the MemoryKept condition on Sandboxes that keep their memory and removes it
// from the others.
func setMemoryKept(sb *agentsv1beta1.Sandbox, obs *observation) {
	m := &obs.memory
	switch {
	case !m.on:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
	case m.reason != "":
		setCondition(sb, agentsv1beta1.SandboxConditionMemoryKept, m.status, m.reason, m.message)
	}
}

// cleanDeletedMemory removes the memory images of a deleted Sandbox: its checkpoints get forget
// Pods, and finished forgets go with their records. Each node Pod's change brings the next pass.
func (r *Reconciler) cleanDeletedMemory(ctx context.Context, key types.NamespacedName) error {
	if r.opts.Memory.unavailable() != "" {
		return nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(r.opts.Memory.Namespace),
		client.MatchingLabels{agentsv1beta1.SandboxNameHashLabel: naming.NameHash(key.Name)}, client.HasLabels{snapshotsv1alpha1.MemoryOpLabel}); err != nil {
		return fmt.Errorf("listing the memory images of deleted sandbox %s: %w", key, err)
	}
	byUID := map[string]*memoryObservation{}
	names := map[string]*agentsv1beta1.Sandbox{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Annotations[snapshotsv1alpha1.MemorySandboxNamespaceAnnotation] != key.Namespace || p.Annotations[snapshotsv1alpha1.MemorySandboxNameAnnotation] != key.Name {
			continue
		}
		uid := p.Labels[snapshotsv1alpha1.MemorySandboxUIDLabel]
		if byUID[uid] == nil {
			byUID[uid] = &memoryObservation{on: true, checkpoints: map[string]*corev1.Pod{}, forgets: map[string]*corev1.Pod{}}
			names[uid] = &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: types.UID(uid)}}
		}
		image := p.Labels[snapshotsv1alpha1.MemoryImageLabel]
		if p.Labels[snapshotsv1alpha1.MemoryOpLabel] == snapshotsv1alpha1.MemoryOpForget {
			byUID[uid].forgets[image] = p
		} else {
			byUID[uid].checkpoints[image] = p
		}
	}
	var errs []error
	for uid, m := range byUID {
		for image, fp := range m.forgets {
			if fp.Status.Phase == corev1.PodSucceeded || fp.Status.Phase == corev1.PodFailed {
				errs = append(errs, r.deleteNodePods(ctx, m.checkpoints[image], fp))
			}
		}
		for _, cp := range m.checkpoints {
			if cp.DeletionTimestamp.IsZero() && (cp.Status.Phase == corev1.PodSucceeded || cp.Status.Phase == corev1.PodFailed) {
				errs = append(errs, r.forgetImage(ctx, names[uid], cp, m))
			}
		}
	}
	return errors.Join(errs...)
}

// memoryPodRequests maps a memory node Pod to its Sandbox.
func memoryPodRequests(_ context.Context, o client.Object) []reconcile.Request {
	if _, ok := o.GetLabels()[snapshotsv1alpha1.MemoryOpLabel]; !ok {
		return nil
	}
	ns, name := o.GetAnnotations()[snapshotsv1alpha1.MemorySandboxNamespaceAnnotation], o.GetAnnotations()[snapshotsv1alpha1.MemorySandboxNameAnnotation]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
