package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// snapshotWrites is what the source sandbox does to its root filesystem as uid 1000 of env-base:
// a directory tree, a file, a symlink, a mode change, and the deletion of a file of the image
// (rm without -f: the file must be there to begin with).
const snapshotWrites = `set -e
cd /home/user
mkdir -p snap/dir/sub
printf hello > snap/dir/file
ln -s dir/file snap/link
printf x > snap/mode
chmod 0751 snap/mode
rm /opt/venv/bin/activate.csh`

// snapshotTree lists what snapshotWrites touched: every entry's type, mode and owner, the size of
// files and links (a directory's size is its filesystem's, which differs between gVisor's
// in-sandbox upper layer and an image layer), the link's target, the file's content and whether
// the deleted file is back.
const snapshotTree = `cd /home/user && { find snap -type d -exec stat -c '%n %F %a %u:%g' {} +; find snap ! -type d -exec stat -c '%n %F %a %u:%g %s' {} +; } | sort
readlink snap/link
cat snap/dir/file; echo
test -e /opt/venv/bin/activate.csh && echo activate.csh present || echo activate.csh deleted`

// snapshotVolumeWrites is what the source sandbox writes to its volume (a volumeClaimTemplate
// mounted at /home/user/data, empty at start): a tree, modes, a symlink, a file created and
// deleted again, and 10 MiB of random data (the capture's benchmark figure).
const snapshotVolumeWrites = `set -e
cd /home/user/data
mkdir -p tree/sub tree/private
printf volume > tree/file
ln -s tree/file link
ln -s ../../../../etc/shadow tree/out
printf m > mode
chmod 0640 mode
chmod 0700 tree/private
printf gone > gone
rm gone
head -c 10485760 /dev/urandom > big`

// snapshotVolumeTree lists the volume: every entry's type, mode and owner (the root's
// included), sizes of files and links, link targets, a content and the big file's digest.
const snapshotVolumeTree = `cd /home/user/data && { find . -type d -exec stat -c '%n %F %a %u:%g' {} +; find . ! -type d -exec stat -c '%n %F %a %u:%g %s' {} +; } | sort
readlink link tree/out
cat tree/file; echo
md5sum big
test -e gone && echo gone present || echo gone deleted`

// testSnapshots: a SandboxSnapshot of a running sandbox becomes Ready on the real node, the
// source keeps running, and a claim of the template it publishes runs exactly the tree the
// source wrote, deletion included; another namespace can neither use the template nor run the
// image (the admission policy); deleting the snapshot keeps its image while the clone runs it and
// deletes it from the registry after; under runc and gVisor. Then the unmodified E2B SDK's
// snapshot and fork calls (snapshotE2B).
func testSnapshots(t *testing.T) {
	t.Run("runc", func(t *testing.T) { snapshotRoundTrip(t, false) })
	t.Run("gvisor", func(t *testing.T) {
		requireGVisor(t)
		snapshotRoundTrip(t, true)
	})
	t.Run("e2b-gvisor", func(t *testing.T) {
		requireGVisor(t)
		snapshotE2B(t, true)
	})
	t.Run("e2b-runc", func(t *testing.T) { snapshotE2B(t, false) })
	t.Run("bench-gvisor", func(t *testing.T) {
		requireGVisor(t)
		snapshotBench(t, true)
	})
	t.Run("bench-runc", func(t *testing.T) { snapshotBench(t, false) })
}

func snapshotRoundTrip(t *testing.T, gvisor bool) {
	ns, other := namespace(t), namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c := paddockClient(t)
	src := sandboxdSandbox(t, "source", ns).VolumeClaim("data", "64Mi").Obj()
	src.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = append(src.Spec.PodTemplate.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "data", MountPath: "/home/user/data"})
	if !gvisor {
		src.Spec.PodTemplate.Spec.RuntimeClassName = nil
	} else if rc := src.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("the example template runs under %v, want %s", rc, devcluster.GVisorRuntimeClass)
	}
	framework.MustCreate(t, ctx, c, src)
	srcIP := waitSandboxReady(t, c, src)
	srcRun := sandboxRunner(t, ctx, c, src, srcIP)
	srcRun("sh", "-c", snapshotWrites)
	want := srcRun("sh", "-c", snapshotTree)
	for _, line := range []string{"snap/dir directory 755 1000:1000\n", "snap/dir/file regular file 644 1000:1000 5\n", "snap/link symbolic link 777 1000:1000 8\n",
		"snap/mode regular file 751 1000:1000 1\n", "snap/dir/sub directory 755 1000:1000\n", "\ndir/file\nhello\nactivate.csh deleted"} {
		if !strings.Contains(want, line) {
			t.Fatalf("the source's tree after its writes:\n%s\nlacks %q", want, line)
		}
	}
	srcRun("sh", "-c", snapshotVolumeWrites)
	wantVolume := srcRun("sh", "-c", snapshotVolumeTree)
	for _, line := range []string{". directory 777 0:0\n", "./tree/private directory 700 1000:1000\n", "./mode regular file 640 1000:1000 1\n",
		"./link symbolic link 777 1000:1000 9\n", "./big regular file 644 1000:1000 10485760\n", "\ntree/file\n../../../../etc/shadow\nvolume\n", "gone deleted"} {
		if !strings.Contains(wantVolume, line) {
			t.Fatalf("the source's volume after its writes:\n%s\nlacks %q", wantVolume, line)
		}
	}

	framework.MustCreate(t, ctx, c, builder.MakeSnapshot("snap", ns, src.Name).Obj())
	snap := &snapshotsv1alpha1.SandboxSnapshot{}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "snap"}, snap); err != nil {
			return err
		}
		if snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed {
			return nil // reported below, without waiting out the timeout
		}
		return builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, "")
	})
	if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		t.Fatalf("snapshot %s is %s: %s (%s)", snap.Name, snap.Status.Phase, builder.FormatConditions(snap.Status.Conditions), findSnapCondition(snap, snapshotsv1alpha1.ConditionCaptured).Message)
	}
	t.Logf("snapshot %s (10 MiB in its volume): image %s, layers %v bytes, source paused %v ms, created to Ready %v", snap.Name, snap.Status.Image,
		deref(snap.Status.SizeBytes), deref(snap.Status.PausedMilliseconds), snap.Status.CompletionTime.Sub(snap.CreationTimestamp.Time))
	if snap.Status.PausedMilliseconds == nil || !strings.Contains(snap.Status.Image, "/snapshots/"+ns+"/snap@sha256:") {
		t.Errorf("status %+v: want the image in the dev registry under the namespace, and the pause reported", snap.Status)
	}
	if d := cmp.Diff([]snapshotsv1alpha1.SnapshotContent{snapshotsv1alpha1.SnapshotContentFilesystem, snapshotsv1alpha1.SnapshotContentVolumes}, snap.Status.Contents); d != "" {
		t.Errorf("status.contents (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"data"}, snap.Status.Volumes); d != "" {
		t.Errorf("status.volumes (-want +got):\n%s", d)
	}
	// The source was resumed: it answers, with its tree and volume unchanged.
	if got := srcRun("sh", "-c", snapshotTree); got != want {
		t.Errorf("the source's tree after the snapshot (-before +after):\n%s", cmp.Diff(want, got))
	}
	if got := srcRun("sh", "-c", snapshotVolumeTree); got != wantVolume {
		t.Errorf("the source's volume after the snapshot (-before +after):\n%s", cmp.Diff(wantVolume, got))
	}

	// A claim of the published template, through a warm pool of it (fork), sees the same tree.
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("fork", ns, snap.Status.TemplateName).Replicas(1).Obj())
	framework.MustCreate(t, ctx, c, builder.MakeClaim("clone", ns, "fork").Obj())
	claim := &extensionsv1beta1.SandboxClaim{}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clone"}, claim); err != nil {
			return err
		}
		return builder.HasCondition(claim.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "")
	})
	clone := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim.Status.Sandbox.Name}}
	cloneIP := waitSandboxReady(t, c, clone)
	cloneRun := sandboxRunner(t, ctx, c, clone, cloneIP)
	if got := cloneRun("sh", "-c", snapshotTree); got != want {
		t.Errorf("the clone's tree (-source +clone):\n%s", cmp.Diff(want, got))
	}
	// Its own new volume holds exactly the source's volume tree.
	if got := cloneRun("sh", "-c", snapshotVolumeTree); got != wantVolume {
		t.Errorf("the clone's volume (-source +clone):\n%s", cmp.Diff(wantVolume, got))
	}
	if pvc := (&corev1.PersistentVolumeClaim{}); c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + clone.Name}, pvc) != nil {
		t.Errorf("the clone %s has no PVC data-%s of its own", clone.Name, clone.Name)
	}
	// The clone changes its volume, then suspends keeping its root filesystem (before the
	// snapshot's deletion, which takes the clone's source template with it): the resumed Pod
	// runs the restore init container again, which must keep the volume as the clone left it
	// (it is not empty), not put the snapshot's contents back.
	cloneRun("sh", "-c", "cd /home/user/data && rm big && printf newer > tree/file")
	wantResumed := cloneRun("sh", "-c", snapshotVolumeTree)
	cloneRun = suspendAndResume(t, ctx, c, clone, 1, func(s *agentsv1beta1.Sandbox) {
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs)
		s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	})
	if got := cloneRun("sh", "-c", snapshotVolumeTree); got != wantResumed {
		t.Errorf("the clone's volume after suspend and resume (-before +after):\n%s", cmp.Diff(wantResumed, got))
	}

	// Another namespace: the template is not there, and a Pod naming the image is refused.
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("thief", other, snap.Status.TemplateName).Replicas(1).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		pool := &extensionsv1beta1.SandboxWarmPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: other, Name: "thief"}, pool); err != nil {
			return err
		}
		return builder.HasCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionTemplateReady, metav1.ConditionFalse, extensionsv1beta1.PoolReasonTemplateNotFound)
	})
	thief := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "thief"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: snap.Status.Image, Command: []string{"cat", "/home/user/snap/dir/file"}}}},
	}
	err := c.Create(ctx, thief)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), "are SandboxSnapshots") {
		t.Errorf("a Pod in namespace %s running %s: error %v, want it refused by the snapshot image policy", other, snap.Status.Image, err)
	}
	// The same Pod in the snapshot's own namespace is admitted (the policy is not a blanket ban).
	own := thief.DeepCopy()
	own.Namespace = ns
	if err := c.Create(ctx, own, client.DryRunAll); err != nil {
		t.Errorf("a Pod in the snapshot's namespace %s running its image: %v", ns, err)
	}

	// Deleting the snapshot keeps its image while the clone runs it (its Pod may have to pull it
	// again), then deletes it from the registry once the clone and its pool are gone.
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusOK {
		t.Fatalf("the registry answers %d for the Ready snapshot's image %s", got, snap.Status.Image)
	}
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		got := &snapshotsv1alpha1.SandboxSnapshot{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), got); err != nil {
			return err
		}
		return builder.HasCondition(got.Status.Conditions, snapshotsv1alpha1.ConditionImageDeleted, metav1.ConditionFalse, snapshotsv1alpha1.ReasonImageInUse)
	})
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusOK {
		t.Fatalf("the registry answers %d for %s while the clone runs it; want it kept", got, snap.Status.Image)
	}
	if got := cloneRun("cat", "/home/user/snap/dir/file"); got != "hello" {
		t.Errorf("the clone after its snapshot's deletion reads %q", got)
	}
	for _, obj := range []client.Object{claim, &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fork"}}} {
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), &snapshotsv1alpha1.SandboxSnapshot{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("snapshot %s still exists (get error %v)", snap.Name, err)
		}
		return nil
	})
	if got := framework.ManifestStatus(t, snap.Status.Image); got != http.StatusNotFound {
		t.Errorf("the registry answers %d for %s after its snapshot and users are gone; want 404", got, snap.Status.Image)
	}
}

// sandboxRunner runs commands in sb through sandboxd and returns their output; a non-zero exit
// fails the test.
func sandboxRunner(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox, ip string) func(cmd ...string) string {
	t.Helper()
	procs := dialSandboxd(t, ip, sandboxToken(t, ctx, c, sb))
	return func(cmd ...string) string {
		t.Helper()
		res, err := procs.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: cmd}})
		if err != nil {
			t.Fatalf("%s in %s: %v", strings.Join(cmd, " "), sb.Name, err)
		}
		if res.GetExitCode() != 0 {
			t.Fatalf("%s in %s exited %d: %s%s", strings.Join(cmd, " "), sb.Name, res.GetExitCode(), res.GetStdout(), res.GetStderr())
		}
		return string(res.GetStdout())
	}
}

func deref(p *int64) any {
	if p == nil {
		return "(unset)"
	}
	return *p
}

func findSnapCondition(snap *snapshotsv1alpha1.SandboxSnapshot, typ string) metav1.Condition {
	for _, c := range snap.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
