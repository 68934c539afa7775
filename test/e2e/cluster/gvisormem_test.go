package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/framework"
)

// interpreterFIFO is where the interpreter reads its input: a FIFO in gVisor's own tmpfs, so it is
// part of the sandbox's memory like the interpreter itself.
const interpreterFIFO = "/tmp/interpreter-in"

// interpreterProgram keeps a secret and a running total in a Python interpreter's variables and
// prints both for every number it reads from interpreterFIFO. A fresh start prints "ready" with a
// new secret; a restored one only answers.
const interpreterProgram = `import os, secrets
os.mkfifo("` + interpreterFIFO + `")
secret = secrets.token_hex(8)
total = 0
print("ready", secret, flush=True)
while True:
    with open("` + interpreterFIFO + `") as f:
        for line in f:
            total += int(line)
            print(f"secret={secret} total={total}", flush=True)
`

var readyLine = regexp.MustCompile(`(?m)^ready ([0-9a-f]{16})$`)

// testGVisorMemory: a python3 interpreter under gVisor holds a secret and a running total; a
// privileged helper Pod on the node checkpoints its sandbox (runsc checkpoint --leave-running)
// into the node's memory image directory, and two new Pods carrying
// snapshots.paddock.dev/restore-from continue that interpreter through Paddock's shim: the same
// secret, the total going on from the checkpoint, each Pod diverging on its own while the
// source keeps running. A name that would leave the image directory, or a missing image, fails
// the Pod instead of booting it fresh.
func testGVisorMemory(t *testing.T) {
	requireGVisor(t)
	ns := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	image := envBaseImage(t, ctx)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns)
		}
	})

	create(t, ctx, interpreterPod("source", ns, image, ""))
	waitReady(t, ns, "source")
	secret := waitInterpreterReady(t, ns, "source")
	feedInterpreter(t, ctx, ns, "source", 5, secret, 5)
	feedInterpreter(t, ctx, ns, "source", 7, secret, 12)

	name := memoryImageName(t)
	start := time.Now()
	checkpointSandbox(t, ctx, ns, name, containerID(t, ctx, ns, "source"))
	t.Logf("checkpoint of the source's sandbox (leave-running) took %s (Pod created to Succeeded, load %s)", time.Since(start).Round(time.Millisecond), loadAverage())
	if du, err := dirSize(filepath.Join(snapshotsv1alpha1.MemoryImageDir, name)); err == nil {
		t.Logf("checkpoint image %s: %d bytes", name, du)
	}
	// The source goes on: the checkpoint left it running.
	feedInterpreter(t, ctx, ns, "source", 100, secret, 112)

	for i, fork := range []string{"fork-a", "fork-b"} {
		start := time.Now()
		create(t, ctx, interpreterPod(fork, ns, image, name))
		waitReady(t, ns, fork)
		t.Logf("%s restored to Ready in %s (load %s)", fork, time.Since(start).Round(time.Millisecond), loadAverage())
		// The restored interpreter answers with the source's secret and the total it had at the
		// checkpoint (12), plus this fork's own input: a fresh start would have a new secret, 0.
		feedInterpreter(t, ctx, ns, fork, i+1, secret, 12+i+1)
		logs := podLogs(t, ctx, ns, fork)
		if readyLine.MatchString(logs) {
			t.Errorf("%s booted a fresh interpreter instead of restoring it:\n%s", fork, logs)
		}
	}
	// Each fork has its own memory from the checkpoint on.
	feedInterpreter(t, ctx, ns, "fork-a", 10, secret, 23)
	feedInterpreter(t, ctx, ns, "fork-b", 10, secret, 24)
	feedInterpreter(t, ctx, ns, "source", 1, secret, 113)

	t.Run("a restore that names no image of the directory fails the Pod", func(t *testing.T) {
		for pod, bad := range map[string]string{"escape": "../../../etc", "missing": "no-such-image"} {
			create(t, ctx, interpreterPod(pod, ns, image, bad))
		}
		refusedRestore(t, ctx, ns, map[string]string{"escape": "is not an image name", "missing": "no such file or directory"})
	})
	t.Run("a Pod of another namespace cannot restore the image (it holds the source's memory)", func(t *testing.T) {
		other := namespace(t)
		create(t, ctx, interpreterPod("thief", other, image, name))
		refusedRestore(t, ctx, other, map[string]string{"thief": "belongs to another namespace"})
	})
}

// refusedRestore waits for each Pod's event naming the refused restore (want) and checks that
// the Pod does not run.
func refusedRestore(t *testing.T, ctx context.Context, ns string, pods map[string]string) {
	t.Helper()
	for pod, want := range pods {
		framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
			events, err := suite.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
			if err != nil {
				return err
			}
			for _, e := range events.Items {
				if strings.Contains(e.Message, "paddock restore") && strings.Contains(e.Message, want) {
					return nil
				}
			}
			return fmt.Errorf("no event of Pod %s names the refused restore (%q): %v", pod, want, eventMessages(events.Items))
		})
		p, err := suite.client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			t.Errorf("Pod %s with a refused restore is Running", pod)
		}
	}
}

// interpreterPod runs interpreterProgram under gVisor; restoreFrom, when set, is the memory image
// the Pod restores instead.
func interpreterPod(name, ns, image, restoreFrom string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RuntimeClassName:              ptr(devcluster.GVisorRuntimeClass),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			Containers: []corev1.Container{{
				Name:            "interpreter",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"python3", "-u", "-c", interpreterProgram},
			}},
		},
	}
	if restoreFrom != "" {
		pod.Annotations = map[string]string{snapshotsv1alpha1.RestoreFromAnnotation: restoreFrom}
	}
	return pod
}

// checkpointSandbox runs runsc checkpoint of container cid's sandbox from a privileged Pod on the
// node, as the snapshot capture Pod does: the node's PID and network namespaces (runsc reaches
// the sandbox through them), runsc's state root and the image directory from the host.
func checkpointSandbox(t *testing.T, ctx context.Context, ns, name, cid string) {
	t.Helper()
	runsc := nodeRunsc(t)
	dir := snapshotsv1alpha1.MemoryImageDir
	// The shim restores an image only into a Pod of the namespace its file "namespace" names.
	script := fmt.Sprintf("mkdir -m 0700 %[1]s/%[2]s && %[3]s --root=/run/containerd/runsc/k8s.io --platform=systrap checkpoint --leave-running --compression=none --image-path=%[1]s/%[2]s %[4]s && printf %%s %[5]s > %[1]s/%[2]s/namespace",
		dir, name, runsc, cid, ns)
	pod := busyboxPod("checkpoint", ns, script)
	pod.Spec.HostPID, pod.Spec.HostNetwork = true, true
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
	mount := func(vol, path string, typ corev1.HostPathType) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: path})
	}
	mount("runsc", runsc, corev1.HostPathFile)
	mount("state", "/run/containerd/runsc", corev1.HostPathDirectory)
	mount("images", dir, corev1.HostPathDirectoryOrCreate)
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(dir, name)) })
	create(t, ctx, pod)
	waitSucceeded(t, ns, "checkpoint")
}

// nodeRunsc is the runsc the node's shim runs (runsc.toml's binary_name).
func nodeRunsc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.stateDir, "containerd", "runsc.toml"))
	if err != nil {
		t.Fatalf("the node's runsc configuration: %v", err)
	}
	m := regexp.MustCompile(`(?m)^binary_name = "([^"]+)"$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("runsc.toml names no runsc:\n%s", data)
	}
	return string(m[1])
}

// envBaseImage is the env-base image of paddock dev up's E2B base template.
func envBaseImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	var base extensionsv1beta1.SandboxTemplate
	if err := paddockClient(t).Get(ctx, client.ObjectKey{Namespace: "default", Name: e2b.DefaultTemplate}, &base); err != nil {
		t.Fatalf("the E2B template %s of paddock dev up: %v", e2b.DefaultTemplate, err)
	}
	return base.Spec.PodTemplate.Spec.Containers[0].Image
}

func memoryImageName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "e2e-" + hex.EncodeToString(b)
}

func containerID(t *testing.T, ctx context.Context, ns, pod string) string {
	t.Helper()
	p, err := suite.client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) == 0 || !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Fatalf("Pod %s has no containerd container: %+v", pod, p.Status.ContainerStatuses)
	}
	return strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
}

func waitInterpreterReady(t *testing.T, ns, pod string) string {
	t.Helper()
	var secret string
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		logs, err := suite.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		m := readyLine.FindSubmatch(logs)
		if m == nil {
			return fmt.Errorf("the interpreter in %s has not printed its secret: %q", pod, logs)
		}
		secret = string(m[1])
		return nil
	})
	return secret
}

// feedInterpreter writes n to the interpreter of pod and waits for its answer: secret and total.
func feedInterpreter(t *testing.T, ctx context.Context, ns, pod string, n int, secret string, total int) {
	t.Helper()
	if out, err := execInPod(ctx, ns, pod, "sh", "-c", fmt.Sprintf("echo %d > %s", n, interpreterFIFO)); err != nil {
		t.Fatalf("writing %d to the interpreter in %s: %v: %s", n, pod, err, out)
	}
	want := fmt.Sprintf("secret=%s total=%d", secret, total)
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		logs, err := suite.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), want+"\n") {
			return fmt.Errorf("the interpreter in %s has not answered %q: %q", pod, want, logs)
		}
		return nil
	})
}

func podLogs(t *testing.T, ctx context.Context, ns, pod string) string {
	t.Helper()
	logs, err := suite.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(logs)
}

func eventMessages(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// dumpNamespace logs every Pod's logs and every event of ns, for a failed run.
func dumpNamespace(t *testing.T, ns string) {
	ctx := framework.Context(t, 30*time.Second)
	pods, err := suite.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing Pods of %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		logs, _ := suite.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		t.Logf("Pod %s (%s): %s\nlogs:\n%s", p.Name, p.Status.Phase, describe(&p), logs)
	}
	if events, err := suite.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}
