package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// requireGVisor fails unless the cluster offers RuntimeClass gvisor; a cluster from
// -cluster-kubeconfig may lack it, and then the gVisor tests are skipped.
func requireGVisor(t *testing.T) {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	_, err := suite.client.NodeV1().RuntimeClasses().Get(ctx, devcluster.GVisorRuntimeClass, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !suite.owned:
		t.Skipf("the cluster of -cluster-kubeconfig has no RuntimeClass %s", devcluster.GVisorRuntimeClass)
	case err != nil:
		t.Fatalf("RuntimeClass %s of the cluster paddock dev up brought up: %v", devcluster.GVisorRuntimeClass, err)
	}
}

// testGVisorKernel runs uname in two sandboxd Sandboxes through sandboxd's gRPC API: the one of
// the example template, which names RuntimeClass gvisor, answers from gVisor's own kernel; the
// same pod with the default runtime (runc) answers with the host's kernel.
func testGVisorKernel(t *testing.T) {
	requireGVisor(t)
	ns := namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	c := paddockClient(t)
	gvisor := sandboxdSandbox(t, "gvisor", ns).Obj()
	if rc := gvisor.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("examples/sandboxd-template.yaml names RuntimeClass %v; want %s", rc, devcluster.GVisorRuntimeClass)
	}
	runc := sandboxdSandbox(t, "runc", ns).Obj()
	runc.Spec.PodTemplate.Spec.RuntimeClassName = nil
	framework.MustCreate(t, ctx, c, gvisor)
	framework.MustCreate(t, ctx, c, runc)

	var host syscall.Utsname
	if err := syscall.Uname(&host); err != nil {
		t.Fatal(err)
	}
	hostRelease := utsString(host.Release[:])
	run := func(sb *agentsv1beta1.Sandbox, ip string, cmd ...string) string {
		t.Helper()
		res, err := dialSandboxd(t, ip, sandboxToken(t, ctx, c, sb)).Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: cmd}})
		if err != nil {
			t.Fatalf("%s in %s: %v", strings.Join(cmd, " "), ip, err)
		}
		return string(res.GetStdout()) + string(res.GetStderr())
	}

	gvisorIP, runcIP := waitSandboxReady(t, c, gvisor), waitSandboxReady(t, c, runc)
	uname := run(gvisor, gvisorIP, "uname", "-a")
	t.Logf("uname -a under gVisor: %s", uname)
	if strings.Contains(uname, hostRelease) {
		t.Errorf("uname -a under gVisor = %q; it names the host's kernel %s", uname, hostRelease)
	}
	if dmesg := run(gvisor, gvisorIP, "dmesg"); !strings.Contains(dmesg, "Starting gVisor") {
		t.Errorf("dmesg under gVisor = %q; want gVisor's boot messages", dmesg)
	}
	uname = run(runc, runcIP, "uname", "-a")
	t.Logf("uname -a under runc: %s", uname)
	if !strings.Contains(uname, hostRelease) {
		t.Errorf("uname -a under runc = %q; want the host's kernel %s", uname, hostRelease)
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: gvisor.Name}, pod); err != nil {
		t.Fatal(err)
	}
	// The RuntimeClass's overhead is added to the pod, so the node's accounting includes it.
	if pod.Spec.Overhead.Memory().IsZero() {
		t.Errorf("pod %s under gVisor has no memory overhead: %v", pod.Name, pod.Spec.Overhead)
	}
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// testEphemeralStorage fills a warm pool from a template that requests ephemeral-storage the way
// upstream's python-sandbox-template does: the real node reports the capacity, so it schedules
// and becomes Ready.
func testEphemeralStorage(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	c := paddockClient(t)
	node, err := suite.client.CoreV1().Nodes().Get(ctx, devcluster.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if capacity := node.Status.Allocatable[corev1.ResourceEphemeralStorage]; capacity.IsZero() {
		t.Errorf("node %s reports no allocatable ephemeral-storage: %v", node.Name, node.Status.Allocatable)
	}
	tpl := sandboxdTemplateWithVolume(t, ns)
	tpl.Name = "ephemeral"
	main := &tpl.Spec.PodTemplate.Spec.Containers[0]
	main.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("512Mi")
	main.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	framework.MustCreate(t, ctx, c, tpl)
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("ephemeral", ns, "ephemeral").Replicas(1).Obj())
	cli := &cliEnv{t: t, bin: paddockBinary(t), ns: ns}
	framework.EventuallyWithin(t, 3*time.Minute, func(context.Context) error { return poolReplicas(cli, 1, 1) })
}

// testComponentVersions checks that the Kubernetes components report the version they were
// built from (hack/k8s/go.mod), not the unstamped v0.0.0-master.
func testComponentVersions(t *testing.T) {
	ctx := framework.Context(t, 30*time.Second)
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "hack", "k8s", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("hack/k8s/go.mod requires no k8s.io/kubernetes version")
	}
	want := string(m[1])
	server, err := suite.client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if server.GitVersion != want {
		t.Errorf("kube-apiserver reports %s; want %s", server.GitVersion, want)
	}
	node, err := suite.client.CoreV1().Nodes().Get(ctx, devcluster.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.KubeletVersion; got != want {
		t.Errorf("node %s reports kubelet %s; want %s", node.Name, got, want)
	}
}

// expectRuntimeClass fails unless the pod runs under RuntimeClass want.
func expectRuntimeClass(t *testing.T, ctx context.Context, c client.Client, ns, name, want string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.RuntimeClassName; got == nil || *got != want {
		t.Errorf("pod %s/%s runs under RuntimeClass %v; want %s", ns, name, got, want)
	}
}

// withoutMissingRuntimeClass clears a pod spec's RuntimeClass when the cluster does not offer it
// (a cluster of -cluster-kubeconfig without gVisor), so the example templates run there too.
func withoutMissingRuntimeClass(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	if spec.RuntimeClassName == nil {
		return
	}
	ctx := framework.Context(t, 30*time.Second)
	_, err := suite.client.NodeV1().RuntimeClasses().Get(ctx, *spec.RuntimeClassName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !suite.owned:
		t.Logf("the cluster has no RuntimeClass %s; running the example under the default runtime", *spec.RuntimeClassName)
		spec.RuntimeClassName = nil
	case err != nil:
		t.Fatal(fmt.Errorf("RuntimeClass %s: %w", *spec.RuntimeClassName, err))
	}
}
