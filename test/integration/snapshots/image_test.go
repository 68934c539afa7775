package snapshots

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// readySnapshotInRegistry captures Sandbox "sb" of ns as snapshot "snap" whose image is really
// pushed to the loopback registry at the path a capture pushes to, and returns the snapshot
// once Ready.
func readySnapshotInRegistry(t *testing.T, ns string) *snapshotsv1alpha1.SandboxSnapshot {
	t.Helper()
	runSandbox(t, builder.MakeSandbox("sb", ns).Obj())
	create(t, builder.MakeSnapshot("snap", ns, "sb").Obj())
	snap := waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseCapturing, snapshotsv1alpha1.ConditionCaptured, metav1.ConditionFalse, snapshotsv1alpha1.ReasonCaptureRunning)
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(fmt.Sprintf("%s/%s/%s:%s", testRepository, ns, snap.Name, snap.UID))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("pushing the snapshot's image: %v", err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	finishCapture(t, capturePod(t, snap), corev1.PodSucceeded, snapshot.Result{Image: tag.Context().Digest(digest.String()).String(), SizeBytes: 1024})
	return waitSnapshot(t, ns, "snap", snapshotsv1alpha1.SnapshotPhaseReady, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, snapshotsv1alpha1.ReasonReady)
}

// TestDeletedSnapshotKeepsItsImageWhileInUse: deleting a snapshot deletes its published template
// and the warm pool it controls at once, keeps the image in the registry while a Sandbox of the
// namespace runs it (the condition names it), and deletes the manifest (by digest, and its tag)
// when that Sandbox goes, then the snapshot.
func TestDeletedSnapshotKeepsItsImageWhileInUse(t *testing.T) {
	ns := env.Namespace(t)
	snap := readySnapshotInRegistry(t, ns)
	tagRef := strings.SplitN(snap.Status.Image, "@", 2)[0] + ":" + string(snap.UID)
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusOK {
		t.Fatalf("the snapshot's image answers %d before the deletion", got)
	}
	pool := builder.MakeWarmPool("front-door", ns, snap.Status.TemplateName).Replicas(0).Obj()
	if err := controllerutil.SetControllerReference(snap, pool, env.Client.Scheme()); err != nil {
		t.Fatal(err)
	}
	create(t, pool)
	create(t, builder.MakeSandbox("started-from-it", ns).Image(snap.Status.Image).Obj())

	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), snap); err != nil {
		t.Fatal(err)
	}
	waitImageCondition(t, ns, snapshotsv1alpha1.ReasonImageInUse, "Sandbox started-from-it")
	framework.Eventually(t, func(ctx context.Context) error {
		for name, obj := range map[string]client.Object{snap.Status.TemplateName: &extensionsv1beta1.SandboxTemplate{}, "front-door": &extensionsv1beta1.SandboxWarmPool{}} {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			if err == nil && obj.GetDeletionTimestamp().IsZero() {
				return fmt.Errorf("%T %s of the deleted snapshot is still there, not being deleted", obj, name)
			}
		}
		return nil
	})
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusOK {
		t.Fatalf("the image answers %d while a Sandbox runs it; want it kept", got)
	}

	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), builder.MakeSandbox("started-from-it", ns).Obj()); err != nil {
		t.Fatal(err)
	}
	playImageDelete(t, snap)
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := get(ctx, ns, "snap", &snapshotsv1alpha1.SandboxSnapshot{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("snapshot still exists (get error %v)", err)
		}
		return nil
	})
	for _, ref := range []string{snap.Status.Image, tagRef} {
		if got := framework.ManifestStatus(t, ref); got != http.StatusNotFound {
			t.Errorf("%s answers %d after the snapshot was deleted; want 404", ref, got)
		}
	}
	waitEvent(t, ns, snapshotsv1alpha1.ReasonImageDeleted, snap.Status.Image)
}

// TestRegistryRefusingDeleteDoesNotHoldTheSnapshot: a registry that refuses DELETE leaves the
// image, and the snapshot goes anyway with a warning event that names the image and the fix.
func TestRegistryRefusingDeleteDoesNotHoldTheSnapshot(t *testing.T) {
	ns := env.Namespace(t)
	refusingDeletes.Store(ns, true)
	t.Cleanup(func() { refusingDeletes.Delete(ns) })
	snap := readySnapshotInRegistry(t, ns)
	if err := env.Client.Delete(framework.Context(t, framework.DefaultTimeout), snap); err != nil {
		t.Fatal(err)
	}
	playImageDelete(t, snap)
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := get(ctx, ns, "snap", &snapshotsv1alpha1.SandboxSnapshot{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("snapshot still exists (get error %v)", err)
		}
		return nil
	})
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusOK {
		t.Errorf("the refusing registry's image answers %d; want it still there", got)
	}
	waitEvent(t, ns, snapshotsv1alpha1.ReasonImageNotDeleted, "refused to delete "+snap.Status.Image)
}

// playImageDelete plays the node for snap's image delete Pod: it checks the Pod runs
// paddock-snapshot delete on the capture's node's network, runs the same deletion (the real
// registry client against the loopback registry) with the Pod's arguments, and ends the Pod with
// its result.
func playImageDelete(t *testing.T, snap *snapshotsv1alpha1.SandboxSnapshot) {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, func(ctx context.Context) error {
		var err error
		pod, err = get(ctx, captureNamespace, "snapshot-delete-"+string(snap.UID), &corev1.Pod{})
		return err
	})
	c := pod.Spec.Containers[0]
	args := map[string]string{}
	for _, a := range c.Args[1:] {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		args[k] = v
	}
	if c.Args[0] != "delete" || args["image"] != snap.Status.Image || args["tag"] != string(snap.UID) || !pod.Spec.HostNetwork ||
		pod.Spec.NodeName != nodeName || c.Image != testCaptureImage || ptr.Deref(c.SecurityContext.Privileged, true) || len(pod.Spec.Volumes) != 0 {
		t.Fatalf("image delete Pod: args %q, image %s, node %q, host network %v, privileged %v, volumes %d; want paddock-snapshot delete of %s (tag %s), unprivileged, no volumes, on the node's network of node %s",
			c.Args, c.Image, pod.Spec.NodeName, pod.Spec.HostNetwork, c.SecurityContext.Privileged, len(pod.Spec.Volumes), snap.Status.Image, snap.UID, nodeName)
	}
	res := snapshot.DeleteImage(framework.Context(t, framework.DefaultTimeout), args["image"], args["tag"], false)
	phase := corev1.PodSucceeded
	if res.Error != "" {
		phase = corev1.PodFailed
	}
	finishCapture(t, pod, phase, res)
}

// waitImageCondition waits until snapshot "snap" of ns has ImageDeleted=False with reason and a
// message containing text.
func waitImageCondition(t *testing.T, ns, reason, text string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		snap, err := get(ctx, ns, "snap", &snapshotsv1alpha1.SandboxSnapshot{})
		if err != nil {
			return err
		}
		if err := builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, reason); err != nil {
			return err
		}
		if c := findCondition(snap, snapshotsv1alpha1.ConditionImageDeleted); !strings.Contains(c.Message, text) {
			return fmt.Errorf("condition %s says %q, want it to name %q", c.Type, c.Message, text)
		}
		return nil
	})
}

// waitEvent waits for an event of ns with reason whose note contains text.
func waitEvent(t *testing.T, ns, reason, text string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s event naming %q in %s; events: %q", reason, text, ns, seen)
	})
}
