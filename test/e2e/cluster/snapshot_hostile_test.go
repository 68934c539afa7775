package cluster

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/snapshot/capture"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// hostilePlant is what hostile code in the source sandbox (uid 1000 of env-base, no capability)
// leaves in its root filesystem before a snapshot: symlinks out of the sandbox (to its
// /etc/shadow, to a canary file on the node, to ../../../../..), a hard link to a file it owns
// and an attempt at one to a file it does not own, a FIFO nobody writes to, a socket, names made
// of dots, a directory 100 deep and one 2000 wide, files of several MiB (random data not a
// multiple of gVisor's 1 MiB tar chunk, and a 5 MiB hole followed by data), and a file rewritten
// in place in a loop (in its own session, so it outlives the command and runs during the
// capture). %s is the node's canary path.
const hostilePlant = `set -e
cd /home/user
mkdir -p h
ln -s /etc/shadow h/shadow
ln -s %s h/canary
ln -s ../../../../.. h/up
ln -s ../../../../../etc/shadow h/up-shadow
printf own > h/own
ln h/own h/own-link
if ln /etc/passwd h/passwd-link 2>h/passwd-link.err; then echo hardlink:made; else echo "hardlink:refused:$(cat h/passwd-link.err)"; fi
rm -f h/passwd-link.err
mkfifo h/fifo
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("h/sock")'
mkdir -p h/... h/..a
printf dots > h/.../..x
d=h/deep; for i in $(seq 100); do d=$d/d; done; mkdir -p $d; printf bottom > $d/f
mkdir h/wide; (cd h/wide && seq 2000 | xargs touch)
head -c 3145733 /dev/urandom > h/chunks
truncate -s 5M h/holey; printf end >> h/holey
setsid sh -c 'i=0; while :; do i=$((i+1)); printf %%08d $i > /home/user/h/loop; done' </dev/null >/dev/null 2>&1 &
echo planted`

// hostileTree lists the planted tree as a clone must have it: every entry's path, type, mode and
// owner, link count, size and link target (sizes of directories left out: they are the
// filesystem's), the digests of the multi-MiB files, and the loop file's content on its own line.
const hostileTree = `cd /home/user && find h ! -path h/loop \( \( -type d -printf '%p %y %m %U:%G\n' \) -o \( ! -type d -printf '%p %y %m %U:%G %n %s %l\n' \) \) | LC_ALL=C sort
md5sum h/chunks h/holey
printf 'loop=%s\n' "$(cat h/loop)"`

// testSnapshotHostile: hostile code in a sandbox plants links, a FIFO, a socket, odd names, deep
// and wide trees and a file rewritten during the capture; the snapshot is Ready with exactly that
// tree (links as links, nothing outside the sandbox read), the source is resumed, and a clone
// gets the tree. A device node (if the sandbox can make one) and a 100 GiB sparse file fail the
// capture with a condition naming the file, without filling the node. Then a capture killed with
// SIGKILL while the source is paused: the source is resumed and the snapshot says it failed.
// Under runc and gVisor.
func testSnapshotHostile(t *testing.T) {
	t.Run("hostile-runc", func(t *testing.T) { snapshotHostile(t, false) })
	t.Run("hostile-gvisor", func(t *testing.T) {
		requireGVisor(t)
		snapshotHostile(t, true)
	})
	t.Run("killed-runc", func(t *testing.T) { snapshotKilled(t, false) })
	t.Run("killed-gvisor", func(t *testing.T) {
		requireGVisor(t)
		snapshotKilled(t, true)
	})
	t.Run("attacker-runc", snapshotAttackerRows)
}

// hostileSource starts the sandboxd example Sandbox under runc or gVisor and returns it with a
// runner of commands in it.
func hostileSource(t *testing.T, ctx context.Context, c client.Client, ns string, gvisor bool) (*agentsv1beta1.Sandbox, func(cmd ...string) string) {
	t.Helper()
	src := sandboxdSandbox(t, "source", ns).Obj()
	if !gvisor {
		src.Spec.PodTemplate.Spec.RuntimeClassName = nil
	} else if rc := src.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("the example template runs under %v, want %s", rc, devcluster.GVisorRuntimeClass)
	}
	framework.MustCreate(t, ctx, c, src)
	return src, sandboxRunner(t, ctx, c, src, waitSandboxReady(t, c, src))
}

// waitSnapshotDone waits until the snapshot is Ready or Failed and returns it.
func waitSnapshotDone(t *testing.T, c client.Client, ns, name string) *snapshotsv1alpha1.SandboxSnapshot {
	t.Helper()
	snap := &snapshotsv1alpha1.SandboxSnapshot{}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, snap); err != nil {
			return err
		}
		if snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed {
			return nil
		}
		return builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionReady, metav1.ConditionTrue, "")
	})
	return snap
}

// waitSourceResumed waits for a failed snapshot's SourceResumed condition to be True.
func waitSourceResumed(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		snap := &snapshotsv1alpha1.SandboxSnapshot{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, snap); err != nil {
			return err
		}
		return builder.HasCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionSourceResumed, metav1.ConditionTrue, "")
	})
}

// loopAdvances checks that the source's rewrite loop runs (so the source is not paused): the
// counter it writes changes. The loop starts in the background, so its file may not exist yet.
func loopAdvances(t *testing.T, run func(cmd ...string) string) {
	t.Helper()
	read := func() string { return run("sh", "-c", "cat /home/user/h/loop 2>/dev/null || true") }
	first := read()
	framework.Eventually(t, func(context.Context) error {
		if got := read(); got == first || got == "" {
			return fmt.Errorf("the source's loop still writes %q: paused?", got)
		}
		return nil
	})
}

// nodeFile is a file on the node (the host the e2e runs on) whose hash must not change.
type nodeFile struct {
	path string
	sum  string
}

func hashNodeFile(t *testing.T, p string) nodeFile {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return nodeFile{p, hex.EncodeToString(s[:])}
}

func snapshotHostile(t *testing.T, gvisor bool) {
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	cfg := devcluster.Defaults(cmp.Or(suite.stateDir, *stateDirFlag))

	// A canary on the node, outside every sandbox, with content nobody else has.
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "canary")
	canaryContent := "canary-" + hex.EncodeToString(secret)
	if err := os.WriteFile(canary, []byte(canaryContent), 0o600); err != nil {
		t.Fatal(err)
	}
	shadow, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatal(err)
	}
	before := []nodeFile{hashNodeFile(t, canary), hashNodeFile(t, "/etc/shadow")}
	defer func() { // nothing on the node changed
		for _, f := range before {
			if now := hashNodeFile(t, f.path); now.sum != f.sum {
				t.Errorf("the node's %s changed during the captures", f.path)
			}
		}
	}()
	var disk syscall.Statfs_t
	if err := syscall.Statfs(cfg.StateDir, &disk); err != nil {
		t.Fatal(err)
	}
	freeBefore := int64(disk.Bavail) * disk.Bsize

	src, run := hostileSource(t, ctx, c, ns, gvisor)
	planted := run("sh", "-c", fmt.Sprintf(hostilePlant, canary))
	t.Logf("planted (%s):\n%s", map[bool]string{true: "gVisor", false: "runc"}[gvisor], planted)
	if !strings.HasSuffix(strings.TrimSpace(planted), "planted") {
		t.Fatalf("planting the tree: %s", planted)
	}
	loopAdvances(t, run)

	// 1. The tree without a device node or a huge file: Ready, nothing outside read.
	framework.MustCreate(t, ctx, c, builder.MakeSnapshot("hostile", ns, src.Name).Obj())
	snap := waitSnapshotDone(t, c, ns, "hostile")
	if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		t.Fatalf("snapshot of the planted tree is %s, want Ready: %s", snap.Status.Phase, builder.FormatConditions(snap.Status.Conditions))
	}
	t.Logf("snapshot hostile: image %s, layer %v bytes, source paused %v ms", snap.Status.Image, deref(snap.Status.SizeBytes), deref(snap.Status.PausedMilliseconds))
	loopAdvances(t, run)
	want := run("sh", "-c", hostileTree)
	checkHostileLayer(t, snap.Status.Image, canaryContent, string(shadow))

	// A clone from the published template (a pool without members: a cold create).
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("clone", ns, snap.Status.TemplateName).Replicas(0).Obj())
	framework.MustCreate(t, ctx, c, builder.MakeClaim("clone", ns, "clone").Obj())
	claim := &extensionsv1beta1.SandboxClaim{}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clone"}, claim); err != nil {
			return err
		}
		return builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, "")
	})
	clone := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim.Status.Sandbox.Name}}
	cloneRun := sandboxRunner(t, ctx, c, clone, waitSandboxReady(t, c, clone))
	got := cloneRun("sh", "-c", hostileTree)
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")
	// The socket is skipped by the capture (nothing can be listening in a clone); the loop's
	// counter differs (the clone has the value at the pause, and no loop runs there).
	wantLines = dropPrefixed(wantLines, "h/sock ", "loop=")
	var cloneLoop string
	for _, l := range gotLines {
		if v, ok := strings.CutPrefix(l, "loop="); ok {
			cloneLoop = v
		}
	}
	gotLines = dropPrefixed(gotLines, "loop=")
	if d := gocmp.Diff(wantLines, gotLines); d != "" {
		t.Errorf("the clone's planted tree (-source +clone):\n%s", d)
	}
	if !regexp.MustCompile(`^[0-9]{0,8}$`).MatchString(cloneLoop) {
		t.Errorf("the clone's h/loop holds %q; want what the loop had written at the pause (up to 8 digits)", cloneLoop)
	}
	t.Logf("the clone's h/loop: %q (rewritten in a loop during the capture)", cloneLoop)
	for _, l := range []string{"h/shadow l 777 1000:1000 1 11 /etc/shadow", "h/up l 777 1000:1000 1 14 ../../../../..", "h/fifo p ", "h/own f 644 1000:1000 2 3 "} {
		if !strings.Contains(got, l) {
			t.Errorf("the clone's tree lacks %q:\n%s", l, firstLines(got, 40))
		}
	}
	// The links are links in the clone too: they resolve in the clone, never to the node.
	if out := cloneRun("sh", "-c", "cat /home/user/h/canary 2>&1 || echo unreadable"); strings.Contains(out, canaryContent) {
		t.Errorf("the clone reads the node's canary through h/canary: %q", out)
	}

	// 2. A device node, if the sandbox can make one: the capture must refuse it.
	mknod := run("sh", "-c", "cd /home/user && if mknod h/null c 1 3 2>h/mknod.err; then echo made; else cat h/mknod.err; fi; rm -f h/mknod.err")
	t.Logf("mknod of a character device in the sandbox: %s", strings.TrimSpace(mknod))
	if strings.TrimSpace(mknod) == "made" {
		expectCaptureFailed(t, ctx, c, ns, src.Name, "device", "/home/user/h/null: a device node", run)
		run("rm", "/home/user/h/null")
	}

	// 3. A sparse file of 100 GiB: charged at its apparent size, it fails the capture at once;
	// the node's disk does not fill. Under gVisor the sentry writes the tar: it must stop when the
	// capture closes the pipe, its memory must not grow with the file (before the fix in
	// hack/gvisor/gvisor-tar-stream-files.patch it reached 23 GB), and the source must be the
	// same sandbox, resumed, afterwards.
	id := sourceContainerID(t, ctx, c, src)
	var sentry sentryMemory
	if gvisor {
		sentry = watchSentry(t, ctx, cfg, id)
	}
	sparse := run("sh", "-c", "truncate -s 100G /home/user/h/sparse 2>&1 && du -k /home/user/h/sparse && stat -c '%s bytes' /home/user/h/sparse || echo refused")
	t.Logf("the sparse file in the sandbox: %s", strings.TrimSpace(sparse))
	if strings.Contains(sparse, "refused") {
		t.Errorf("the sandbox could not make a 100 GiB sparse file: %s", sparse)
	} else {
		expectCaptureFailed(t, ctx, c, ns, src.Name, "sparse", "/home/user/h/sparse: its 107374182400 bytes would take the layer past its limit", run)
	}
	if got := run("echo", "answers"); got != "answers\n" {
		t.Errorf("the source after the refused capture answers %q", got)
	}
	if now := sourceContainerID(t, ctx, c, src); now != id {
		t.Errorf("the source's container is %s after the refused capture, was %s: the sandbox was restarted", now, id)
	}
	if gvisor {
		sentry.report(t)
		// The node still serves: a new gVisor sandbox starts and answers.
		other := sandboxdSandbox(t, "other", ns).Obj()
		framework.MustCreate(t, ctx, c, other)
		otherRun := sandboxRunner(t, ctx, c, other, waitSandboxReady(t, c, other))
		if got := otherRun("echo", "answers"); got != "answers\n" {
			t.Errorf("a new sandbox after the refused capture answers %q", got)
		}
	}
	if err := syscall.Statfs(cfg.StateDir, &disk); err != nil {
		t.Fatal(err)
	}
	freeAfter := int64(disk.Bavail) * disk.Bsize
	t.Logf("node disk free under %s: %d MiB before, %d MiB after", cfg.StateDir, freeBefore>>20, freeAfter>>20)
	if freeBefore-freeAfter > 100*(1<<30)/2 {
		t.Errorf("the node's disk lost %d MiB during the captures: the sparse file was expanded", (freeBefore-freeAfter)>>20)
	}
}

// sentryMemory samples the memory of a gVisor sandbox's sentry (the runsc-sandbox process on the
// node) while a capture runs, for the log: a measurement, not an assertion.
type sentryMemory struct {
	pid        int
	hwmBefore  int64 // VmHWM (peak RSS) in KiB when the watch started
	peakRSS    chan int64
	stop       context.CancelFunc
	findFailed string
}

// watchSentry finds the sentry of container id (its Pod's sandbox ID is the last argument of
// runsc-sandbox boot) and samples its VmRSS every 20 ms until report.
func watchSentry(t *testing.T, ctx context.Context, cfg devcluster.Config, id string) sentryMemory {
	t.Helper()
	ctrd, err := capture.DialContainerd(cfg.ContainerdSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer ctrd.Close()
	m := sentryMemory{peakRSS: make(chan int64, 1)}
	raw, err := ctrd.Spec(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	sandboxID := spec.Annotations["io.kubernetes.cri.sandbox-id"]
	m.pid = sentryPID(sandboxID)
	if m.pid == 0 {
		m.findFailed = fmt.Sprintf("no runsc-sandbox process for sandbox %q on the node", sandboxID)
		return m
	}
	m.hwmBefore = procStatusKiB(m.pid, "VmHWM")
	wctx, cancel := context.WithCancel(ctx)
	m.stop = cancel
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, procStatusKiB(m.pid, "VmRSS"))
			select {
			case <-wctx.Done():
				m.peakRSS <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// report stops the sampling and logs the sentry's peak RSS during the capture; the sentry must
// still run (a sandbox killed for its memory would have a new one).
func (m sentryMemory) report(t *testing.T) {
	t.Helper()
	if m.pid == 0 {
		t.Logf("the sentry's memory was not measured: %s", m.findFailed)
		return
	}
	m.stop()
	peak := <-m.peakRSS
	hwm := procStatusKiB(m.pid, "VmHWM")
	if hwm == 0 {
		t.Errorf("the source's sentry (pid %d) is gone after the refused capture", m.pid)
		return
	}
	t.Logf("the source's sentry (pid %d) during the sparse capture: peak VmRSS %d MiB (sampled every 20 ms); VmHWM %d MiB before, %d MiB after", m.pid, peak>>10, m.hwmBefore>>10, hwm>>10)
}

// sentryPID finds the node's runsc-sandbox process of the gVisor sandbox sandboxID; 0 if none.
func sentryPID(sandboxID string) int {
	if sandboxID == "" {
		return 0
	}
	pid, _ := findProcess(func(args []string) bool {
		return len(args) > 2 && args[0] == "runsc-sandbox" && args[len(args)-1] == sandboxID
	})
	return pid
}

// findProcess returns the first process of the node whose command line (its arguments) match
// accepts; 0 if none does.
func findProcess(match func(args []string) bool) (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) {
			return pid, nil
		}
	}
	return 0, nil
}

// procStatusKiB reads a "Name: N kB" line of /proc/pid/status; 0 if the process or line is gone.
func procStatusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// expectCaptureFailed snapshots src as name and wants it Failed with a Captured condition whose
// message contains msg, the source resumed (its loop runs) and no image.
func expectCaptureFailed(t *testing.T, ctx context.Context, c client.Client, ns, src, name, msg string, run func(cmd ...string) string) {
	t.Helper()
	framework.MustCreate(t, ctx, c, builder.MakeSnapshot(name, ns, src).Obj())
	snap := waitSnapshotDone(t, c, ns, name)
	captured := findCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionCaptured)
	t.Logf("snapshot %s: %s", name, builder.FormatConditions(snap.Status.Conditions))
	if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseFailed || captured == nil || captured.Status != metav1.ConditionFalse || !strings.Contains(captured.Message, msg) {
		t.Errorf("snapshot %s is %s with %s; want Failed, Captured=False naming %q", name, snap.Status.Phase, builder.FormatConditions(snap.Status.Conditions), msg)
	}
	if snap.Status.Image != "" || snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseReady {
		t.Errorf("snapshot %s has image %q (phase %s); a failed capture stores nothing", name, snap.Status.Image, snap.Status.Phase)
	}
	waitSourceResumed(t, c, ns, name)
	loopAdvances(t, run)
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func dropPrefixed(lines []string, prefixes ...string) []string {
	out := lines[:0:0]
	for _, l := range lines {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				keep = false
			}
		}
		if keep {
			out = append(out, l)
		}
	}
	return out
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// checkHostileLayer reads the layer the snapshot added from the registry: the symlinks are
// stored as symlinks with the sandbox's targets, the FIFO as a FIFO, no entry escapes the
// layer's root, and no file holds the node's canary or /etc/shadow (which a followed link
// would have copied).
func checkHostileLayer(t *testing.T, image, canary, shadow string) {
	t.Helper()
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("reading %s: %v", image, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers of %s: %d, %v", image, len(layers), err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	entries := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the layer of %s: %v", image, err)
		}
		clean := path.Clean(h.Name)
		if path.IsAbs(h.Name) || clean == ".." || strings.HasPrefix(clean, "../") {
			t.Errorf("layer entry %q escapes the layer's root", h.Name)
		}
		entries[clean] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(canary)) || (len(shadow) > 0 && bytes.Contains(b, []byte(shadow))) {
				t.Errorf("layer entry %s holds the node's canary or /etc/shadow", h.Name)
			}
		}
	}
	for p, want := range map[string]string{"home/user/h/shadow": "/etc/shadow", "home/user/h/up": "../../../../..", "home/user/h/up-shadow": "../../../../../etc/shadow"} {
		if h := entries[p]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != want {
			t.Errorf("layer entry %s: %+v; want a symlink to %s", p, h, want)
		}
	}
	if h := entries["home/user/h/fifo"]; h == nil || h.Typeflag != tar.TypeFifo {
		t.Errorf("layer entry home/user/h/fifo: %+v; want a FIFO", h)
	}
	if h := entries["home/user/h/sock"]; h != nil {
		t.Errorf("layer entry home/user/h/sock: %+v; want the socket skipped", h)
	}
	if h := entries["home/user/h/sparse"]; h != nil {
		t.Errorf("layer entry home/user/h/sparse in the Ready snapshot: %+v", h)
	}
	t.Logf("layer of %s: %d entries", image, len(entries))
}

// snapshotKilled: while the capture has the source paused, its process gets SIGKILL (no
// deferred resume can run). The snapshot must end Failed, never Ready, naming the failure, and
// the controller's resume Pod must resume the source: a command in it answers and its loop runs.
func snapshotKilled(t *testing.T, gvisor bool) {
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	cfg := devcluster.Defaults(cmp.Or(suite.stateDir, *stateDirFlag))
	ctrd, err := capture.DialContainerd(cfg.ContainerdSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer ctrd.Close()

	src, run := hostileSource(t, ctx, c, ns, gvisor)
	// Enough to copy that the pause lasts long enough to be seen: 300 MB and 5000 files.
	run("sh", "-c", `set -e; cd /home/user; mkdir -p h/many; head -c 314572800 /dev/zero > h/big; (cd h/many && seq 5000 | xargs touch)
setsid sh -c 'i=0; while :; do i=$((i+1)); printf %08d $i > /home/user/h/loop; done' </dev/null >/dev/null 2>&1 &`)
	loopAdvances(t, run)
	id := sourceContainerID(t, ctx, c, src)

	// The pause may end before the poll sees it; a snapshot that ends without being killed is
	// deleted and another one taken.
	for attempt := range 3 {
		name := fmt.Sprintf("killed-%d", attempt)
		framework.MustCreate(t, ctx, c, builder.MakeSnapshot(name, ns, src.Name).Obj())
		pid, err := killCaptureWhilePaused(ctx, c, ctrd, ns, name, id)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if pid == 0 {
			snap := waitSnapshotDone(t, c, ns, name)
			t.Logf("attempt %d: the capture was not seen paused (snapshot %s, paused %v ms); again", attempt, snap.Status.Phase, deref(snap.Status.PausedMilliseconds))
			if err := c.Delete(ctx, snap); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Logf("killed the capture process %d (SIGKILL) while container %s was paused", pid, id)
		snap := waitSnapshotDone(t, c, ns, name)
		t.Logf("snapshot %s after the kill: %s", name, builder.FormatConditions(snap.Status.Conditions))
		if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseFailed || snap.Status.Image != "" {
			t.Errorf("snapshot %s is %s (image %q) after its capture was killed; want Failed with no image", name, snap.Status.Phase, snap.Status.Image)
		}
		captured := findCondition(snap.Status.Conditions, snapshotsv1alpha1.ConditionCaptured)
		if captured == nil || captured.Status != metav1.ConditionFalse || (captured.Reason != snapshotsv1alpha1.ReasonCaptureFailed && captured.Reason != snapshotsv1alpha1.ReasonCaptureLost) {
			t.Errorf("Captured condition %+v; want False, CaptureFailed or CaptureLost", captured)
		}
		waitSourceResumed(t, c, ns, name)
		if paused, err := ctrd.Paused(ctx, id); err != nil || paused {
			t.Errorf("container %s after the resume: paused %v (%v)", id, paused, err)
		}
		if got := run("echo", "answers"); got != "answers\n" {
			t.Errorf("the source after the kill answers %q", got)
		}
		loopAdvances(t, run)
		return
	}
	t.Fatal("three captures ended before their pause was seen; the copy is too quick to kill mid-pause")
}

// sourceContainerID is the containerd ID of the Sandbox's first container.
func sourceContainerID(t *testing.T, ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox) string {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(sb.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) > 0 && strings.HasPrefix(p.Name, sb.Name) {
			if id, ok := strings.CutPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"); ok {
				return id
			}
		}
	}
	t.Fatalf("no running Pod of Sandbox %s/%s", sb.Namespace, sb.Name)
	return ""
}

// killCaptureWhilePaused polls containerd until container id is paused and the snapshot's
// capture process runs, then kills that process with SIGKILL and returns its pid. It returns 0
// if the snapshot ended before that.
func killCaptureWhilePaused(ctx context.Context, c client.Client, ctrd *capture.Containerd, ns, name, id string) (int, error) {
	deadline := time.Now().Add(5 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n := 0; time.Now().Before(deadline); n++ {
		paused, err := ctrd.Paused(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("task of %s: %w", id, err)
		}
		if paused {
			pid, err := captureProcess(id)
			if err != nil {
				return 0, err
			}
			if pid != 0 {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					return 0, fmt.Errorf("killing the capture %d: %w", pid, err)
				}
				return pid, nil
			}
		}
		if n%100 == 0 { // every half second: has the snapshot ended?
			snap := &snapshotsv1alpha1.SandboxSnapshot{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, snap); err != nil {
				return 0, err
			}
			if snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseReady || snap.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed {
				return 0, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
	return 0, fmt.Errorf("snapshot %s/%s: no paused capture within 5 minutes", ns, name)
}

// captureProcess finds, in the node's /proc, the paddock-snapshot capture of container id (its
// command line has "capture" and --container-id=<id>); 0 if none runs.
func captureProcess(id string) (int, error) {
	return findProcess(func(args []string) bool {
		return slices.Contains(args, "capture") && slices.Contains(args, "--container-id="+id)
	})
}

// snapshotAttackerRows tries what issue 28 lists against a namespace's snapshot, from another
// namespace and after its deletion (runc): a Sandbox there forging the reference to it
// (snapshots.paddock.dev/resume-from naming it, with the rootfs opt-in) starts from its own
// image; once the snapshot is deleted its image is gone from the registry, a Pod of its own
// namespace (which the admission policy admits) cannot pull it, and code in a sandbox gets no
// manifest from the registry's node address. The warm pool and Pod of another namespace naming
// the template or the image are TestCluster/snapshots' rows; E2B IDs from another key are the
// e2b SDK's (client/snapshot.mjs) and TestSnapshotAttacker's.
func snapshotAttackerRows(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	ctx := framework.Context(t, 15*time.Minute)
	c := paddockClient(t)
	src, run := hostileSource(t, ctx, c, ns, false)
	run("sh", "-c", "printf secret > /home/user/victim")
	framework.MustCreate(t, ctx, c, builder.MakeSnapshot("snap", ns, src.Name).Obj())
	snap := waitSnapshotDone(t, c, ns, "snap")
	if snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		t.Fatalf("snapshot is %s: %s", snap.Status.Phase, builder.FormatConditions(snap.Status.Conditions))
	}

	// A forged reference from another namespace: the Sandbox names the victim's snapshot as the
	// capture to resume from. Only captures the Sandbox controls count: it starts from its image.
	forger := sandboxdSandbox(t, "source", other).
		Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).
		Annotation(snapshotsv1alpha1.ResumeFromAnnotation, "snap").Obj()
	forger.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, forger)
	forgerRun := sandboxRunner(t, ctx, c, forger, waitSandboxReady(t, c, forger))
	framework.Eventually(t, func(ctx context.Context) error {
		sb := &agentsv1beta1.Sandbox{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(forger), sb); err != nil {
			return err
		}
		return builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionRootfsKept, metav1.ConditionFalse, agentsv1beta1.SandboxReasonRootfsSnapshotMissing)
	})
	if out := forgerRun("sh", "-c", "cat /home/user/victim 2>&1 || echo absent"); strings.Contains(out, "secret") {
		t.Errorf("a Sandbox in %s forging resume-from: snap reads the victim's file: %q", other, out)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(other)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, ctr := range p.Spec.Containers {
			if strings.Contains(ctr.Image, "/snapshots/") {
				t.Errorf("Pod %s/%s of the forger runs %s", other, p.Name, ctr.Image)
			}
		}
	}
	t.Logf("forged resume-from in %s: RootfsKept=False SnapshotMissing, the Pod runs the template's image", other)

	// The snapshot deleted (nothing runs its image): its image goes from the registry.
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKeyFromObject(snap), &snapshotsv1alpha1.SandboxSnapshot{})
		if err == nil {
			return fmt.Errorf("snapshot %s still exists", snap.Name)
		}
		return client.IgnoreNotFound(err)
	})
	if got := framework.ManifestStatus(t, snap.Status.Image); got != 404 {
		t.Errorf("the registry answers %d for the deleted snapshot's image %s; want 404", got, snap.Status.Image)
	}
	// A Pod of the snapshot's own namespace (admitted by the policy) cannot pull it any more.
	puller := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "puller"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: snap.Status.Image, ImagePullPolicy: corev1.PullAlways,
			Command: []string{"cat", "/home/user/victim"}}}},
	}
	framework.MustCreate(t, ctx, c, puller)
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(puller), p); err != nil {
			return err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil || s.State.Terminated != nil {
				t.Fatalf("the deleted snapshot's image %s ran in Pod %s/%s: %+v", snap.Status.Image, ns, puller.Name, s.State)
			}
			if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				t.Logf("a Pod of %s pulling the deleted snapshot's image: %s: %s", ns, w.Reason, w.Message)
				return nil
			}
		}
		return fmt.Errorf("Pod %s/%s: %+v", ns, puller.Name, p.Status.ContainerStatuses)
	})
	// Code in a sandbox asks the registry on the node's address for the manifest directly.
	ref, err := name.ParseReference(snap.Status.Image)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s:%s/v2/%s/manifests/%s", nodeInternalIP(t, ctx), registryPort, ref.Context().RepositoryStr(), ref.Identifier())
	out := strings.TrimSpace(run("python3", "-c", `import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print("unreachable", type(e).__name__)`, url))
	t.Logf("GET %s from a sandbox: %s", url, out)
	if out == "200" {
		t.Errorf("code in a sandbox read the deleted snapshot's manifest from %s", url)
	}
}
