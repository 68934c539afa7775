// Package snapshotnode proves the node side of snapshots on a real containerd, runc and overlayfs
// (the Debian packages `make e2e-deps` installs) without a cluster: a private containerd with its
// own root, state and socket, images in an OCI registry on loopback, containers run with ctr. A
// container writes files, deletes image files, changes modes and owners and makes links; the
// capture pauses it, stores its writes as a layer and resumes it; a new container from the
// snapshot image must list exactly the same tree. Hostile trees fail the capture and leave the
// source running. Needs root, as the cluster tests do.
package snapshotnode

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/snapshot/capture"
	"github.com/paddock-dev/paddock/internal/snapshot/layer"
	"github.com/paddock-dev/paddock/test/framework"
)

// node is a private containerd and a loopback registry holding a busybox image.
type node struct {
	t        testing.TB
	socket   string
	registry string
	base     string // the busybox image by digest
}

func startNode(t testing.TB) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (containerd, overlay mounts); the e2e tests run as root")
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: install the dev cluster's packages with make e2e-deps", bin)
		}
	}
	// Under /var/lib, which holds an overlay upper directory where a temp dir in an overlay may not.
	root, err := os.MkdirTemp("/var/lib", "paddock-snapshot-test-")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("/run", "paddock-snapshot-test-")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, socket: filepath.Join(state, "containerd.sock")}
	config := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n",
		filepath.Join(root, "root"), filepath.Join(state, "state"), n.socket, filepath.Join(root, "opt"))
	if err := os.WriteFile(filepath.Join(root, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command("containerd", "--config", filepath.Join(root, "config.toml"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Containers first (their shims hold mounts under root), then containerd, then its dirs.
		out, _ := n.ctrOutput("task", "ls", "-q")
		for _, id := range strings.Fields(out) {
			_, _ = n.ctrOutput("task", "kill", "-s", "KILL", id)
		}
		for _, id := range strings.Fields(out) {
			_, _ = n.ctrOutput("task", "rm", "-f", id)
			_, _ = n.ctrOutput("container", "rm", id)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = exec.Command("umount", "-R", filepath.Join(state, "state")).Run()
		_ = os.RemoveAll(state)
		_ = os.RemoveAll(root)
		if t.Failed() {
			t.Logf("containerd log:\n%s", logs.String())
		}
	})
	framework.EventuallyWithin(t, 30*time.Second, func(context.Context) error {
		_, err := n.ctrOutput("version")
		return err
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(&bytes.Buffer{}, "", 0))))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	n.registry = l.Addr().String()
	tree, err := image.BusyboxTree("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.FromTree(tree, image.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin:/sbin:/usr/bin:/usr/sbin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.Push(context.Background(), img, n.registry+"/busybox:1"); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	n.base = n.registry + "/busybox@" + digest.String()
	n.ctr("image", "pull", "--plain-http", n.base)
	return n
}

func (n *node) ctrOutput(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	return string(out), err
}

func (n *node) ctr(args ...string) string {
	n.t.Helper()
	out, err := n.ctrOutput(args...)
	if err != nil {
		n.t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// list runs the listing script in container id and returns what it printed. A listing is never
// empty (it names at least the root it lists); ctr's exec now and then returns with an exit
// status of 0 and none of the output (seen in CI, stop 37), so an empty answer is asked again,
// under a new exec ID.
func (n *node) list(id, script string) string {
	n.t.Helper()
	var out string
	attempt := 0
	framework.EventuallyWithin(n.t, 30*time.Second, func(context.Context) error {
		attempt++
		var err error
		out, err = n.ctrOutput("task", "exec", "--exec-id", fmt.Sprintf("list-%d", attempt), id, "sh", "-c", script)
		switch {
		case err != nil:
			return fmt.Errorf("ctr task exec %s: %v\n%s", id, err, out)
		case strings.TrimSpace(out) == "":
			return fmt.Errorf("ctr task exec %s printed nothing", id)
		}
		return nil
	})
	return out
}

// run starts container id from img running script, then sleeping; it returns once the script
// has written /ready.
func (n *node) run(id, img, script string) {
	n.t.Helper()
	n.ctr("run", "-d", "--snapshotter", "overlayfs", img, id, "sh", "-c", script+" && touch /ready && exec sleep 100000")
	framework.EventuallyWithin(n.t, 30*time.Second, func(context.Context) error {
		_, err := n.ctrOutput("task", "exec", "--exec-id", "ready", id, "test", "-e", "/ready")
		return err
	})
}

// status is the task's status as ctr lists it (RUNNING, PAUSED, ...).
func (n *node) status(id string) string {
	n.t.Helper()
	for _, line := range strings.Split(n.ctr("task", "ls"), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == id {
			return f[2]
		}
	}
	return ""
}

func (n *node) capture(id, tag string) (string, int64, int64, string) {
	n.t.Helper()
	rt, err := capture.DialContainerd(n.socket)
	if err != nil {
		n.t.Fatal(err)
	}
	defer rt.Close()
	res := capture.Run(framework.Context(n.t, 2*time.Minute), rt, capture.Options{
		ContainerID: id, BaseImage: n.base, Target: n.registry + "/ns/snap:" + tag, Insecure: true,
		WorkDir: n.t.TempDir(), Layer: layer.Options{Limits: layer.DefaultLimits()},
	})
	return res.Image, res.SizeBytes, res.PausedMilliseconds, res.Error
}

// treeScript lists the root filesystem (one mount, so -xdev leaves out /proc, /sys, /dev) with
// type, owner, mode, size, link target and content hash of every entry, sorted. /ready and the
// listing's own traces are left out.
const treeScript = `find / -xdev ! -path /ready | sort | while read -r f; do
  s=$(stat -c '%F %u:%g %a %s' "$f")
  case "$s" in
    "symbolic link"*) echo "$f $s -> $(readlink "$f")" ;;
    "regular"*) echo "$f $s $(md5sum < "$f")" ;;
    *) echo "$f $s" ;;
  esac
done`

// The source's writes: new files with modes and owners, a deleted image file, a replaced
// directory (opaque), symlinks out of the tree, a hard link and a FIFO.
const writes = `mkdir -p /work/sub &&
echo hello > /work/a && chmod 600 /work/a &&
echo owned > /work/sub/b && chown 1000:2000 /work/sub/b && chmod 4750 /work/sub/b &&
dd if=/dev/urandom of=/work/random bs=1k count=300 2>/dev/null &&
ln /work/a /work/a-hard &&
ln -s ../../../../../../etc/shadow /work/escape && ln -s /etc/passwd /work/abs &&
mkfifo /work/fifo &&
rm /bin/ls &&
rm -rf /sbin && mkdir /sbin && echo new > /sbin/only &&
chmod 700 /usr`

// TestCaptureRestoresTree: a Sandbox-like container's writes come back exactly in a container
// started from the snapshot, and the source runs on.
func TestCaptureRestoresTree(t *testing.T) {
	n := startNode(t)
	n.run("src", n.base, writes)
	want := n.list("src", treeScript)

	img, size, paused, errMsg := n.capture("src", "1")
	if errMsg != "" {
		t.Fatalf("capture: %s", errMsg)
	}
	t.Logf("captured %s: layer %d bytes, source paused %d ms", img, size, paused)
	if s := n.status("src"); s != "RUNNING" {
		t.Fatalf("source is %s after the capture, want RUNNING", s)
	}
	n.ctr("image", "pull", "--plain-http", img)
	n.run("fork", img, "true")
	got := n.list("fork", treeScript)
	if got != want {
		t.Errorf("the tree of a container from the snapshot differs from the source's:\n%s", lineDiff(want, got))
	}
	for _, must := range []string{"/work/sub/b regular file 1000:2000 4750 6", "/work/a regular file 0:0 600 6", "/usr directory 0:0 700", "/work/escape symbolic link 0:0 777 28 -> ../../../../../../etc/shadow", "/sbin/only regular file", "/work/fifo fifo"} {
		if !strings.Contains(got, must) {
			t.Errorf("the restored tree lacks %q", must)
		}
	}
	if strings.Contains(got, "/bin/ls ") {
		t.Error("/bin/ls, deleted in the source, is back")
	}
}

// TestHostileTreeLeavesSourceRunning: a device node the sandbox made fails the capture, naming
// it, and the source is resumed.
func TestHostileTreeLeavesSourceRunning(t *testing.T) {
	n := startNode(t)
	n.run("src", n.base, "mkdir -p /work && mknod /work/disk b 8 0")
	_, _, _, errMsg := n.capture("src", "hostile")
	if !strings.Contains(errMsg, "/work/disk: a block device") {
		t.Fatalf("capture error %q, want the block device refused", errMsg)
	}
	if s := n.status("src"); s != "RUNNING" {
		t.Fatalf("source is %s after a failed capture, want RUNNING", s)
	}
}

// lineDiff lists the lines only one side has.
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// TestResumeAfterKilledCapture: what the resume Pod runs after a capture was killed between its
// pause and its resume (SIGKILL skips the capture's own resume): `paddock-snapshot resume`
// resumes the paused container on the real containerd, and succeeds again on a running one and
// on one that is gone, since it runs after every capture that ended without a result.
func TestResumeAfterKilledCapture(t *testing.T) {
	n := startNode(t)
	n.run("src", n.base, "true")
	bin := filepath.Join(t.TempDir(), "paddock-snapshot")
	build := exec.Command("go", "build", "-o", bin, "./cmd/paddock-snapshot")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building paddock-snapshot: %v\n%s", err, out)
	}
	resume := func(id string) {
		t.Helper()
		out, err := exec.Command(bin, "resume", "--containerd-socket="+n.socket, "--container-id="+id).CombinedOutput()
		if err != nil {
			t.Fatalf("paddock-snapshot resume %s: %v\n%s", id, err, out)
		}
	}
	// The state a capture killed mid-copy leaves: the container frozen by containerd's Pause.
	n.ctr("task", "pause", "src")
	if s := n.status("src"); s != "PAUSED" {
		t.Fatalf("source is %s after ctr task pause, want PAUSED", s)
	}
	resume("src")
	if s := n.status("src"); s != "RUNNING" {
		t.Fatalf("source is %s after paddock-snapshot resume, want RUNNING", s)
	}
	resume("src")
	resume("no-such-container")
}

// volumeWrites is what the source writes to its volume (a bind mount of a host directory, as
// the kubelet gives a PVC): files with owners and modes (set-user-ID), a hard link, symlinks out
// of the volume, a FIFO, a deleted file and a root with its own mode.
const volumeWrites = `mkdir -p /vol/sub /vol/private &&
echo data > /vol/a && chmod 640 /vol/a && chown 1000:1000 /vol/a &&
echo owned > /vol/sub/b && chown 1000:2000 /vol/sub/b && chmod 4750 /vol/sub/b &&
dd if=/dev/urandom of=/vol/random bs=1k count=300 2>/dev/null &&
ln /vol/a /vol/a-hard &&
ln -s ../../../../etc/shadow /vol/escape &&
mkfifo /vol/fifo &&
echo gone > /vol/gone && rm /vol/gone &&
chmod 700 /vol/private && chmod 751 /vol`

// volumeTreeScript lists /vol as treeScript lists the root filesystem, with hard-link counts.
const volumeTreeScript = `find /vol | sort | while read -r f; do
  s=$(stat -c '%F %u:%g %a %h' "$f")
  case "$s" in
    "symbolic link"*) echo "$f $s -> $(readlink "$f")" ;;
    "regular"*) echo "$f $s $(md5sum < "$f")" ;;
    "directory"*) echo "$f $s" ;;
    *) echo "$f $s" ;;
  esac
done`

// TestCaptureRestoresVolume: a container's volume is captured in the same pause as its root
// filesystem, into the snapshot image with the restore binary; a container from that image
// whose fresh volume is filled by the restore (as the restore init container does) lists
// exactly the source's volume; a second restore into the now non-empty volume keeps it.
func TestCaptureRestoresVolume(t *testing.T) {
	n := startNode(t)
	bin := buildRestoreBinary(t)
	srcVol, forkVol := t.TempDir(), t.TempDir()
	n.runWithVolume("src", n.base, srcVol, volumeWrites)
	want := n.list("src", volumeTreeScript)
	res := n.captureVolume("src", "vol", bin)
	if res.Error != "" {
		t.Fatalf("capture: %s", res.Error)
	}
	t.Logf("captured %s: layers %d bytes, source paused %d ms", res.Image, res.SizeBytes, res.PausedMilliseconds)
	if s := n.status("src"); s != "RUNNING" {
		t.Fatalf("source is %s after the capture, want RUNNING", s)
	}
	n.ctr("image", "pull", "--plain-http", res.Image)
	restore := snapshot.RestoreBinaryPath + " restore --volume=data=/vol"
	n.runWithVolume("fork", res.Image, forkVol, restore+" > /restored")
	got := n.list("fork", volumeTreeScript)
	if got != want {
		t.Errorf("the restored volume differs from the source's:\n%s", lineDiff(want, got))
	}
	for _, must := range []string{"/vol directory 0:0 751", "/vol/sub/b regular file 1000:2000 4750 1", "/vol/a regular file 1000:1000 640 2", "/vol/escape symbolic link 0:0 777 1 -> ../../../../etc/shadow", "/vol/fifo fifo"} {
		if !strings.Contains(got, must) {
			t.Errorf("the restored volume lacks %q:\n%s", must, got)
		}
	}
	if out := n.ctr("task", "exec", "--exec-id", "out", "fork", "cat", "/restored"); !strings.Contains(out, "volume data at /vol: restored") {
		t.Errorf("restore said %q", out)
	}
	// The container changes its volume; a restore run again (a resumed Pod) keeps it.
	n.ctr("task", "exec", "--exec-id", "change", "fork", "sh", "-c", "rm /vol/random && echo newer > /vol/a")
	changed := n.list("fork", volumeTreeScript)
	if out := n.ctr("task", "exec", "--exec-id", "again", "fork", "sh", "-c", restore); !strings.Contains(out, "volume data at /vol: kept") {
		t.Errorf("second restore said %q, want kept", out)
	}
	if after := n.list("fork", volumeTreeScript); after != changed {
		t.Errorf("a second restore changed the volume:\n%s", lineDiff(changed, after))
	}
}

// buildRestoreBinary builds paddock-snapshot statically, as the capture image holds it.
func buildRestoreBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "paddock-snapshot")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/paddock-dev/paddock/cmd/paddock-snapshot")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building paddock-snapshot: %v\n%s", err, out)
	}
	return bin
}

// runWithVolume is run with the host directory vol bind-mounted at /vol, as the kubelet mounts a
// PVC.
func (n *node) runWithVolume(id, img, vol, script string) {
	n.t.Helper()
	n.ctr("run", "-d", "--snapshotter", "overlayfs", "--mount", "type=bind,src="+vol+",dst=/vol,options=rbind:rw", img, id,
		"sh", "-c", script+" && touch /ready && exec sleep 100000")
	framework.EventuallyWithin(n.t, 30*time.Second, func(context.Context) error {
		_, err := n.ctrOutput("task", "exec", "--exec-id", "ready", id, "test", "-e", "/ready")
		return err
	})
}

// captureVolume captures id with its volume at /vol as "data", resolving the volume's host path
// from the node's root ("/": the test runs on the node).
func (n *node) captureVolume(id, tag, bin string) snapshot.Result {
	n.t.Helper()
	rt, err := capture.DialContainerd(n.socket)
	if err != nil {
		n.t.Fatal(err)
	}
	defer rt.Close()
	return capture.Run(framework.Context(n.t, 2*time.Minute), rt, capture.Options{
		ContainerID: id, BaseImage: n.base, Target: n.registry + "/ns/snap:" + tag, Insecure: true,
		WorkDir: n.t.TempDir(), Layer: layer.Options{Limits: layer.DefaultLimits()},
		Volumes: []snapshot.Volume{{Name: "data", MountPath: "/vol"}}, HostRoot: "/", RestoreBinary: bin,
	})
}
