package e2bfrontdoor

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestPauseConnectKeepsRootfs: with snapshots.paddock.dev/suspend: rootfs on the pool's
// template, E2B's pause captures the sandbox's root filesystem before its Pod goes (the Pod
// stays until the capture is Ready), and connect starts the sandbox again from the captured
// image, with fresh credentials by reference as before. The capture is not an E2B snapshot:
// listSnapshots does not show it.
func TestPauseConnectKeepsRootfs(t *testing.T) {
	h := start(t, 0)
	ctx := framework.Context(t, framework.DefaultTimeout)
	var tpl extensionsv1beta1.SandboxTemplate
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "base-tpl"}, &tpl); err != nil {
		t.Fatal(err)
	}
	orig := tpl.DeepCopy()
	metav1.SetMetaDataAnnotation(&tpl.ObjectMeta, snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs)
	if err := env.Client.Patch(ctx, &tpl, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	playCaptures(t, h)
	sbx := h.create(t, "/v2/sandboxes", map[string]any{})
	claim := h.claim(t, sbx.SandboxID)
	sb := h.boundSandbox(t, claim)
	if got := sb.Annotations[snapshotsv1alpha1.SuspendAnnotation]; got != snapshotsv1alpha1.SuspendRootfs {
		t.Fatalf("the claim's Sandbox has %s = %q; want the template's %q", snapshotsv1alpha1.SuspendAnnotation, got, snapshotsv1alpha1.SuspendRootfs)
	}
	podName := sb.Annotations[agentsv1beta1.PodNameAnnotation]
	// The sandbox's container runs on a node (a Pod without a running container has nothing to
	// capture and would go at once).
	var before corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		runOnNode(ctx, &snapshotsv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns}, Spec: snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: sb.Name}})
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: podName}, &before); err != nil {
			return err
		}
		if len(before.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s has no running container yet", podName)
		}
		return nil
	})

	path := "/sandboxes/" + sbx.SandboxID
	if r := h.call(t, http.MethodPost, path+"/pause", h.apiKey, map[string]any{}); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	// The capture is Ready before the Pod is deleted; the kubelet's part (confirming the
	// deletion of a bound Pod) is played here.
	var image string
	framework.Eventually(t, func(ctx context.Context) error {
		var got agentsv1beta1.Sandbox
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept)
		if c == nil || c.Reason != agentsv1beta1.SandboxReasonRootfsCaptured {
			return fmt.Errorf("RootfsKept is %+v, want reason Captured", c)
		}
		name := got.Annotations[snapshotsv1alpha1.ResumeFromAnnotation]
		var snap snapshotsv1alpha1.SandboxSnapshot
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &snap); err != nil {
			return err
		}
		image = snap.Status.Image
		return nil
	})
	framework.Eventually(t, func(ctx context.Context) error {
		var pod corev1.Pod
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(&before), &pod)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case pod.UID != before.UID:
			return nil
		case pod.DeletionTimestamp.IsZero():
			return fmt.Errorf("the paused sandbox's Pod is not being deleted")
		}
		return env.Client.Delete(ctx, &pod, client.GracePeriodSeconds(0))
	})
	if list, _ := h.listSnapshots(t, h.apiKey, ""); len(list) != 0 {
		t.Errorf("listSnapshots shows %v; the pause's capture is not an E2B snapshot", ids(list))
	}

	if r := h.call(t, http.MethodPost, "/v2"+path+"/connect", h.apiKey, map[string]any{"timeout": 60}); r.status != http.StatusCreated {
		t.Fatalf("connect to a paused sandbox: %d %s; want 201", r.status, r.body)
	}
	var after corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: podName}, &after); err != nil {
		t.Fatal(err)
	}
	if after.UID == before.UID || after.Spec.Containers[0].Image != image {
		t.Errorf("after connect the Pod (new: %v) runs %q; want a new Pod running the capture %q", after.UID != before.UID, after.Spec.Containers[0].Image, image)
	}
	if want, got := envRefs(before.Spec.Containers[0]), envRefs(after.Spec.Containers[0]); fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("the resumed Pod's secret references %v differ from the first Pod's %v", got, want)
	}
}

// envRefs lists the container's variables that come from Secrets, as name=secret/key.
func envRefs(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out = append(out, e.Name+"="+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
		}
	}
	return out
}
