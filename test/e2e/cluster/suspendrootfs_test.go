package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// rootfsWrites is what the sandbox does outside any volume, as uid 1000 of env-base: a file in
// /var/tmp with its own mode, a program installed into the image's virtualenv (on PATH there), and a
// tree with a symlink in its home directory.
const rootfsWrites = `set -e
printf 'kept\n' > /var/tmp/agent-notes
chmod 0640 /var/tmp/agent-notes
printf '#!/bin/sh\necho installed-tool-ran\n' > /opt/venv/bin/agent-tool
chmod 0755 /opt/venv/bin/agent-tool
mkdir -p /home/user/work/dir
printf hello > /home/user/work/dir/file
ln -s dir/file /home/user/work/link`

// rootfsState lists what rootfsWrites (and the second cycle's writes) left, with modes.
const rootfsState = `for f in /var/tmp/agent-notes /var/tmp/second /opt/venv/bin/agent-tool /home/user/work/dir/file /home/user/work/link; do
  if test -e "$f" || test -L "$f"; then stat -c '%n %F %a %u:%g %s' "$f"; else echo "$f absent"; fi
done
cat /var/tmp/agent-notes 2>/dev/null || true
/opt/venv/bin/agent-tool 2>/dev/null || echo agent-tool missing`

// testSuspendRootfs: a Sandbox with snapshots.paddock.dev/suspend: rootfs writes outside its
// volumes, is suspended and resumed twice, and finds everything with its modes, the second
// cycle's deletion and new file included, on runc and gVisor; one without the annotation loses
// its /var/tmp file, as upstream. /tmp is not the root filesystem here: the example template
// mounts an emptyDir there, and gVisor mounts its own tmpfs on an image's empty /tmp (see
// docs/design/snapshots.md).
func testSuspendRootfs(t *testing.T) {
	t.Run("runc", func(t *testing.T) { suspendRootfsCycles(t, false) })
	t.Run("gvisor", func(t *testing.T) {
		requireGVisor(t)
		suspendRootfsCycles(t, true)
	})
	t.Run("without the annotation", suspendWithoutRootfs)
	t.Run("e2b: pause and connect with the SDK", testE2BPauseKeepsRootfs)
}

func suspendRootfsCycles(t *testing.T, gvisor bool) {
	ns := namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "keep", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj()
	if !gvisor {
		sb.Spec.PodTemplate.Spec.RuntimeClassName = nil
	}
	framework.MustCreate(t, ctx, c, sb)
	run := sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	run("sh", "-c", rootfsWrites)
	want := run("sh", "-c", rootfsState)
	for _, line := range []string{"/var/tmp/agent-notes regular file 640 1000:1000 5\n", "/opt/venv/bin/agent-tool regular file 755 1000:1000",
		"/home/user/work/link symbolic link 777 1000:1000 8\n", "/var/tmp/second absent\n", "kept\ninstalled-tool-ran\n"} {
		if !strings.Contains(want, line) {
			t.Fatalf("the sandbox's state after its writes:\n%s\nlacks %q", want, line)
		}
	}

	// First by the idle controller (a short idle timeout, set once the writes are done), then as
	// kubectl and E2B's pause do, through operatingMode.
	run = suspendAndResume(t, ctx, c, sb, 1, func(s *agentsv1beta1.Sandbox) {
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, agentsv1beta1.IdleTimeoutAnnotation, "10s")
	})
	if got := run("sh", "-c", rootfsState); got != want {
		t.Errorf("after the first suspend and resume (-before +after):\n%s", gocmp.Diff(want, got))
	}
	if !gvisor {
		// No credential is in the capture: the sandbox and control tokens (the first works: run
		// uses it) are in no file of the resumed root filesystem. The command line holds them,
		// in memory only.
		token, control := sandboxTokens(t, ctx, c, sb.Name, sb.Namespace)
		if got := run("sh", "-c", "grep -rlsF -e '"+token+"' -e '"+control+"' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; echo searched"); got != "searched\n" {
			t.Errorf("files of the resumed sandbox holding its token:\n%s", got)
		}
	}
	// The second cycle layers on the first: a deletion and a new file.
	run("sh", "-c", "set -e; rm /var/tmp/agent-notes; printf two > /var/tmp/second; chmod 0600 /var/tmp/second")
	want = run("sh", "-c", rootfsState)
	run = suspendAndResume(t, ctx, c, sb, 2, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	got := run("sh", "-c", rootfsState)
	if got != want {
		t.Errorf("after the second suspend and resume (-before +after):\n%s", gocmp.Diff(want, got))
	}
	if !strings.Contains(got, "/var/tmp/agent-notes absent\n") || !strings.Contains(got, "/var/tmp/second regular file 600 1000:1000 3\n") {
		t.Errorf("after the second cycle:\n%s\nwant /var/tmp/agent-notes deleted and /var/tmp/second kept with mode 600", got)
	}
	// One capture is left: the one the running Pod started from. The superseded one is deleted
	// once the newer one is Ready, and its deletion waits for its registry image to go: wait.
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		var snaps snapshotsv1alpha1.SandboxSnapshotList
		if err := c.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, s := range snaps.Items {
			names = append(names, s.Name+"("+string(s.Status.Phase)+")")
		}
		if len(snaps.Items) != 1 || snaps.Items[0].Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
			return fmt.Errorf("captures left after two cycles: %v; want the last one only, Ready", names)
		}
		return nil
	})
}

// suspendAndResume suspends sb with suspend (an operatingMode, or an idle timeout for the idle
// controller), waits for the capture and the Pod's deletion, resumes it (without an idle timeout)
// and returns a runner for the new Pod. It logs the times (the pause, suspend to Pod gone,
// resume to Ready) for docs/performance/results.md; with the idle controller "suspend" counts
// from the idle timeout's start.
func suspendAndResume(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox, cycle int, suspend func(*agentsv1beta1.Sandbox)) func(cmd ...string) string {
	t.Helper()
	podName := sb.Name
	start := time.Now()
	setSandbox(t, c, sb, suspend)
	var snapName string
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept)
		if cond != nil && cond.Reason == agentsv1beta1.SandboxReasonRootfsCaptureFailed {
			return nil // reported below
		}
		if cond == nil || cond.Reason != agentsv1beta1.SandboxReasonRootfsCaptured {
			return fmt.Errorf("RootfsKept is %+v", cond)
		}
		snapName = sb.Annotations[snapshotsv1alpha1.ResumeFromAnnotation]
		return podGone(ctx, c, sb.Namespace, podName)
	})
	if snapName == "" {
		t.Fatalf("suspension %d was not captured: %s", cycle, builder.FormatConditions(sb.Status.Conditions))
	}
	suspended := time.Since(start)
	var snap snapshotsv1alpha1.SandboxSnapshot
	if err := c.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: snapName}, &snap); err != nil {
		t.Fatal(err)
	}
	resumeStart := time.Now()
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) {
		delete(s.Annotations, agentsv1beta1.IdleTimeoutAnnotation)
		s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	})
	ip := waitSandboxReady(t, c, sb)
	resumed := time.Since(resumeStart)
	t.Logf("cycle %d: capture %s (layer %v bytes) paused the sandbox %v ms; suspend to Pod gone %v; resume to Ready %v; total %v",
		cycle, snap.Name, deref(snap.Status.SizeBytes), deref(snap.Status.PausedMilliseconds), suspended.Round(time.Millisecond), resumed.Round(time.Millisecond), (suspended + resumed).Round(time.Millisecond))
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, snap.Status.Image) {
		t.Errorf("RootfsKept after resume %+v; want True naming %s", cond, snap.Status.Image)
	}
	return sandboxRunner(t, ctx, c, sb, ip)
}

// suspendWithoutRootfs: without the annotation, a suspension makes no capture and the resumed
// Pod starts from the image: the /var/tmp file is gone.
func suspendWithoutRootfs(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c := paddockClient(t)
	sb := sandboxdSandbox(t, "plain", ns).Obj()
	sb.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, sb)
	run := sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	run("sh", "-c", "printf x > /var/tmp/agent-notes")
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error { return podGone(ctx, c, ns, sb.Name) })
	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	run = sandboxRunner(t, ctx, c, sb, waitSandboxReady(t, c, sb))
	if got := run("sh", "-c", "test -e /var/tmp/agent-notes && echo present || echo absent"); got != "absent\n" {
		t.Errorf("/var/tmp/agent-notes of a Sandbox without %s after resume: %q, want absent", snapshotsv1alpha1.SuspendAnnotation, got)
	}
	var snaps snapshotsv1alpha1.SandboxSnapshotList
	if err := c.List(ctx, &snaps, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if len(snaps.Items) != 0 {
		t.Errorf("a Sandbox without the annotation got %d snapshots", len(snaps.Items))
	}
}

// testE2BPauseKeepsRootfs: the unmodified E2B SDK pauses a sandbox of dev up's `base` template,
// set to snapshots.paddock.dev/suspend: rootfs (as dev up makes it under runc; under gVisor it
// keeps memory, testE2BPauseKeepsMemory), after writing outside its home volume; once the capture
// is Ready and the Pod gone, connect finds the files with their modes, under gVisor as dev up's
// template runs.
func testE2BPauseKeepsRootfs(t *testing.T) {
	p := pauseE2B(t, snapshotsv1alpha1.SuspendRootfs, "pauserootfs.mjs")
	ctx, c, ns, dir, env := p.ctx, p.c, p.ns, p.dir, p.env
	var res struct {
		SandboxID string `json:"sandboxId"`
	}
	if err := json.Unmarshal(p.result, &res); err != nil || res.SandboxID == "" {
		t.Fatalf("pauserootfs.mjs pause printed %s: %v", p.result, err)
	}
	paused := time.Now()
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.SandboxID}, claim); err != nil {
		t.Fatal(err)
	}
	var sb agentsv1beta1.Sandbox
	podName := "" // the Pod of the paused sandbox; the pod-name annotation goes with the Pod
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(claim.UID)}); err != nil || len(list.Items) != 1 {
			return fmt.Errorf("sandboxes of claim %s: %d (%v)", claim.Name, len(list.Items), err)
		}
		sb = list.Items[0]
		if podName == "" {
			podName = cmp.Or(sb.Annotations[agentsv1beta1.PodNameAnnotation], sb.Name)
		}
		cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept)
		if cond != nil && cond.Reason == agentsv1beta1.SandboxReasonRootfsCaptureFailed {
			return nil
		}
		if cond == nil || cond.Reason != agentsv1beta1.SandboxReasonRootfsCaptured {
			return fmt.Errorf("RootfsKept is %+v", cond)
		}
		return podGone(ctx, c, ns, podName)
	})
	if cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept); cond.Reason != agentsv1beta1.SandboxReasonRootfsCaptured {
		t.Fatalf("the paused sandbox was not captured: %s", cond.Message)
	}
	t.Logf("E2B pause to Pod gone (capture included): %v", time.Since(paused).Round(time.Millisecond))
	start := time.Now()
	if out, err := node(t, ctx, dir, append(env, "E2B_STEP=connect", "E2B_SANDBOX_ID="+res.SandboxID), "pauserootfs.mjs"); err != nil || !strings.Contains(out, "checks passed") {
		t.Fatalf("pauserootfs.mjs connect: %v", err)
	}
	t.Logf("E2B connect of the captured sandbox and one command: %v", time.Since(start).Round(time.Millisecond))
}

// e2bPause is a sandbox the unmodified E2B SDK created from a copy of dev up's `base` template in
// a namespace of its own and paused: result is the last line the pause step of its script printed.
type e2bPause struct {
	ctx    context.Context
	c      client.Client
	ns     string
	dir    string
	env    []string
	devTpl string // the template's snapshots.paddock.dev/suspend as dev up made it
	result []byte
}

// pauseE2B copies dev up's `base` template, with its volume, and sets its
// snapshots.paddock.dev/suspend to mode; starts a pool of one; and runs script's E2B_STEP=pause
// with the unmodified SDK and extra env.
func pauseE2B(t *testing.T, mode, script string, extra ...string) e2bPause {
	t.Helper()
	p := e2bPause{ns: namespace(t), ctx: framework.Context(t, 15*time.Minute), c: paddockClient(t)}
	// The copy carries mode from its create: patched afterwards, the pool's first member could be
	// made from the template as the pool controller's cache still had it (CI at ca9394f: the member
	// kept memory, not the rootfs the test asked for).
	copyDevTemplateWith(t, p.ctx, p.c, e2b.DefaultTemplate, p.ns, e2b.DefaultTemplate, true, func(tpl *extensionsv1beta1.SandboxTemplate) {
		p.devTpl = tpl.Annotations[snapshotsv1alpha1.SuspendAnnotation]
		if tpl.Annotations == nil {
			tpl.Annotations = map[string]string{}
		}
		tpl.Annotations[snapshotsv1alpha1.SuspendAnnotation] = mode
	})
	framework.MustCreate(t, p.ctx, p.c, poolOf(p.ns, e2b.DefaultTemplate, 1))
	key, url := e2bAPIKey(t, p.ctx, p.c, p.ns), e2bURL(t, p.ctx, p.c)
	p.dir = e2bClientDir(t)
	p.env = append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key, "E2B_PKG="+e2bSDKs[0], "E2B_TEMPLATE="+e2b.DefaultTemplate)
	p.env = append(p.env, extra...)
	waitPoolReady(t, p.c, p.ns, e2b.DefaultTemplate, 1)
	out, err := node(t, p.ctx, p.dir, append(p.env, "E2B_STEP=pause"), script)
	if err != nil {
		t.Fatalf("%s pause: %v", script, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	p.result = []byte(lines[len(lines)-1])
	return p
}
