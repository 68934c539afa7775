package devcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

var testCfg = Defaults("/state")

func TestCNIConfig(t *testing.T) {
	var got map[string]any
	if err := json.Unmarshal([]byte(cniConfig(testCfg)), &got); err != nil {
		t.Fatal(err)
	}
	bridge := got["plugins"].([]any)[0].(map[string]any)
	want := map[string]any{
		"type": "bridge", "bridge": "paddock-br", "isGateway": true, "ipMasq": false,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": "/state/cni/ipam",
			"ranges":  []any{[]any{map[string]any{"subnet": "198.18.0.0/24", "gateway": "198.18.0.1"}}},
			"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
		},
	}
	if diff := cmp.Diff(want, bridge); diff != "" {
		t.Fatalf("bridge plugin (-want +got):\n%s", diff)
	}
}

func TestKubeletConfig(t *testing.T) {
	var got map[string]any
	if err := json.Unmarshal([]byte(kubeletConfig(testCfg)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"address":                  "198.18.255.1",
		"clusterDNS":               []any{"198.18.255.1"},
		"containerRuntimeEndpoint": "unix:///state/containerd/containerd.sock",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		// Pod-level cgroups under a root of the cluster's own: in-place resize needs them.
		"cgroupsPerQOS": true,
		"cgroupRoot":    "/paddock-dev",
		"resolvConf":    "/state/kubelet/resolv.conf",
		// Pods requesting ephemeral-storage schedule only where the kubelet reports it.
		"localStorageCapacityIsolation": true,
		"podPidsLimit":                  float64(PodPidsLimit),
	}
	picked := map[string]any{}
	for k := range want {
		picked[k] = got[k]
	}
	if diff := cmp.Diff(want, picked); diff != "" {
		t.Fatalf("kubelet configuration (-want +got):\n%s", diff)
	}
}

func TestContainerdConfigGVisor(t *testing.T) {
	without := containerdConfig(testCfg, "", "overlayfs")
	if strings.Contains(without, "runsc") {
		t.Errorf("containerd config without gVisor names runsc:\n%s", without)
	}
	got := containerdConfig(testCfg, "/cache/gvisor", "overlayfs")
	for _, want := range []string{
		`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]`,
		`runtime_type = "io.containerd.runsc.v1"`,
		`runtime_path = "/cache/gvisor/containerd-shim-runsc-v1"`,
		`TypeUrl = "io.containerd.runsc.v1.options"`,
		`ConfigPath = "/state/containerd/runsc.toml"`,
		// Only the restore annotation reaches runsc's specs from the Pod.
		fmt.Sprintf("pod_annotations = [%q]", snapshotsv1alpha1.RestoreFromAnnotation),
		// runc stays the default: only pods of RuntimeClass gvisor get runsc.
		`default_runtime_name = "runc"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, got)
		}
	}
	if rc := gvisorRuntimeClass(); rc.Handler != gvisorHandler || rc.Name != GVisorRuntimeClass {
		t.Errorf("RuntimeClass %s has handler %s; want %s with handler %s", rc.Name, rc.Handler, GVisorRuntimeClass, gvisorHandler)
	}
	if runsc := runscConfig("/cache/gvisor/runsc"); !strings.Contains(runsc, `binary_name = "/cache/gvisor/runsc"`) || !strings.Contains(runsc, `platform = "systrap"`) ||
		!strings.Contains(runsc, `restore-spec-validation = "warning"`) || !strings.Contains(runsc, `systrap-disable-fast-path = "true"`) {
		t.Errorf("runsc.toml lacks the binary, the systrap platform, the fast path turned off or the restore spec policy:\n%s", runsc)
	}
}

func TestContainerdConfig(t *testing.T) {
	got := containerdConfig(testCfg, "", "overlayfs")
	for _, want := range []string{
		`address = "/state/containerd/containerd.sock"`,
		`sandbox_image = "127.0.0.1:5001/pause:dev"`,
		`restrict_oom_score_adj = true`,
		`snapshotter = "overlayfs"`,
		`conf_dir = "/state/cni/net.d"`,
		`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:5001"]`,
		`endpoint = ["http://127.0.0.1:5001"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, got)
		}
	}
}

func TestCorefile(t *testing.T) {
	got := corefile(testCfg)
	for _, want := range []string{".:53 {", "bind 198.18.255.1", "ready 127.0.0.1:18181", "kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubeconfig /state/kubeconfig paddock-dev"} {
		if !strings.Contains(got, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, got)
		}
	}
	// The only upstream is the internet stand-in's resolver, on this machine.
	var forwards []string
	for _, line := range strings.Split(got, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "forward" {
			forwards = append(forwards, strings.Join(f, " "))
		}
	}
	if diff := cmp.Diff([]string{"forward . 198.19.64.53"}, forwards); diff != "" {
		t.Errorf("Corefile forwards (-want +got):\n%s", diff)
	}
}

func TestGuardRules(t *testing.T) {
	var got []string
	for _, r := range guardRules(testCfg) {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"priority 19818 iif paddock-br to 198.18.0.0/24 lookup main",
		"priority 19818 iif paddock-br to 198.19.64.0/24 lookup main",
		"priority 19819 iif paddock-br unreachable",
		"priority 19818 iif paddock-inet to 198.18.0.0/24 lookup main",
		"priority 19818 iif paddock-inet to 198.19.64.0/24 lookup main",
		"priority 19819 iif paddock-inet unreachable",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guard rules (-want +got):\n%s", diff)
	}
}

func TestNetpolArgsOpenNoPort(t *testing.T) {
	got := pick(netpolArgs(testCfg), "--run-firewall", "--run-router", "--run-service-proxy", "--health-port", "--metrics-port", "--service-cluster-ip-range", "--hostname-override")
	want := []string{"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--health-port=0", "--metrics-port=0", "--service-cluster-ip-range=198.19.128.0/17", "--hostname-override=paddock-dev"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kube-router arguments (-want +got):\n%s", diff)
	}
}

func TestArgsStayInsideTheTestBed(t *testing.T) {
	got := map[string][]string{
		"apiserver": pick(apiServerArgs(testCfg), "--bind-address", "--service-cluster-ip-range", "--authorization-mode"),
		"kubelet":   pick(kubeletArgs(testCfg), "--node-ip", "--hostname-override"),
		"kwok":      pick(kwokArgs(testCfg, []string{"/s/a.yaml", "/s/b.yaml"}), "--cidr", "--manage-nodes-with-label-selector", "--config"),
		"etcd":      pick(etcdArgs(testCfg), "--listen-client-urls", "--listen-peer-urls"),
		"kcm":       pick(controllerManagerArgs(testCfg), "--controllers", "--bind-address"),
	}
	want := map[string][]string{
		"apiserver": {"--bind-address=198.18.255.1", "--service-cluster-ip-range=198.19.128.0/17", "--authorization-mode=Node,RBAC"},
		"kubelet":   {"--node-ip=198.18.255.1", "--hostname-override=paddock-dev"},
		"kwok":      {"--cidr=198.19.0.0/18", "--manage-nodes-with-label-selector=type=kwok", "--config=/state/kwok/kwok.yaml", "--config=/s/a.yaml", "--config=/s/b.yaml"},
		"etcd":      {"--listen-client-urls=http://127.0.0.1:23790", "--listen-peer-urls=http://127.0.0.1:23800"},
		"kcm":       {"--controllers=*,-nodeipam", "--bind-address=127.0.0.1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("arguments (-want +got):\n%s", diff)
	}
}

func pick(args []string, flags ...string) []string {
	var out []string
	for _, f := range flags {
		for _, a := range args {
			if strings.HasPrefix(a, f+"=") {
				out = append(out, a)
			}
		}
	}
	return out
}

func TestKubeconfigLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig("https://198.18.255.1:6443", []byte("CA"), "tok")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.Host, cfg.BearerToken, string(cfg.CAData)}
	if diff := cmp.Diff([]string{"https://198.18.255.1:6443", "tok", "CA"}, got); diff != "" {
		t.Fatalf("kubeconfig (-want +got):\n%s", diff)
	}
}

func TestTokenFileRoundTrip(t *testing.T) {
	in := tokens{Admin: "a1", Kubelet: "k1"}
	got, err := parseTokenFile(tokenFile(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Fatalf("tokens (-want +got):\n%s", diff)
	}
	if _, err := parseTokenFile("x,someone,uid,\"g\"\n"); err == nil || !strings.Contains(err.Error(), "lacks the admin or kubelet token") {
		t.Fatalf("parseTokenFile of a foreign file = %v, want a clear error", err)
	}
}

func TestKWOKNode(t *testing.T) {
	n := kwokNode(7, 1000)
	got := []string{n.Name, n.Labels["type"], n.Labels[corev1.LabelHostname], n.Annotations["kwok.x-k8s.io/node"], string(n.Spec.Taints[0].Effect),
		fmt.Sprint(n.Status.Capacity.Pods().Value()), fmt.Sprint(n.Status.Allocatable.Pods().Value())}
	if diff := cmp.Diff([]string{"paddock-kwok-7", "kwok", "paddock-kwok-7", "fake", "NoSchedule", "1000", "1000"}, got); diff != "" {
		t.Fatalf("fake node (-want +got):\n%s", diff)
	}
}

func TestHostPathVolume(t *testing.T) {
	mode := corev1.PersistentVolumeFilesystem
	reclaim := corev1.PersistentVolumeReclaimDelete
	opts := controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, ReclaimPolicy: &reclaim},
		PVName:       "pvc-123",
		PVC: &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &mode,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}},
		SelectedNodeName: "paddock-dev",
	}
	got := hostPathVolume("/state/volumes", opts)
	want := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-123"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:                    &mode,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "standard",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/state/volumes/pvc-123", Type: ptrTo(corev1.HostPathDirectoryOrCreate),
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"paddock-dev"}}},
			}}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("volume (-want +got):\n%s", diff)
	}
}

func TestProvisionerDeleteOnlyItsOwnDirectories(t *testing.T) {
	dir := t.TempDir()
	p := hostPathProvisioner{dir: dir}
	outside := t.TempDir()
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: outside},
	}}}
	if err := p.Delete(t.Context(), pv); err == nil {
		t.Fatal("Delete of a path outside the volume dir succeeded, want an ignored error")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("the outside directory is gone: %v", err)
	}
	mine := filepath.Join(dir, "pvc-1")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	pv.Spec.HostPath.Path = mine
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Fatalf("volume directory still there: %v", err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	if got := unescapeMountPath(`/a\040b/c`); got != "/a b/c" {
		t.Fatalf("unescapeMountPath = %q, want %q", got, "/a b/c")
	}
}

func TestRemoveRunscState(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "containerd", "runsc")
	ours := filepath.Join(root, "k8s.io")
	other := filepath.Join(root, "other")
	for _, f := range []string{filepath.Join(ours, "null-netns"), filepath.Join(other, "null-netns"), filepath.Join(other, "abc.state")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeRunscState(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Errorf("%s after removal: %v; want it gone", ours, err)
	}
	// A namespace with a live sandbox's state keeps it, and so do the directories above it.
	if _, err := os.Stat(filepath.Join(other, "abc.state")); err != nil {
		t.Errorf("another sandbox's state was removed: %v", err)
	}
	if err := removeRunscState(filepath.Join(parent, "missing")); err != nil {
		t.Errorf("removing a missing root: %v", err)
	}
}

// TestRemoveRunscStateStackedMounts stacks bind mounts of a network namespace on null-netns the way
// sandboxes created at once leave it (runsc does not serialize that); one unmount leaves the file
// busy and `dev down` failed with EBUSY.
func TestRemoveRunscStateStackedMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root; CI and `make test` run as root")
	}
	root := filepath.Join(t.TempDir(), "runsc")
	netns := filepath.Join(root, "k8s.io", "null-netns")
	if err := os.MkdirAll(filepath.Dir(netns), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netns, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountAll(netns) })
	for range 3 {
		if err := syscall.Mount("/proc/self/ns/net", netns, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount on %s: %v", netns, err)
		}
	}
	if err := removeRunscState(root); err != nil {
		t.Fatalf("removeRunscState with three stacked mounts: %v", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("%s after removal: %v; want it gone", root, err)
	}
}

func TestRuleFields(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`-A INPUT -m comment --comment "kube-router netpol - 4IA2OSFRMVNDXBVV" -j KUBE-ROUTER-INPUT`,
			[]string{"-A", "INPUT", "-m", "comment", "--comment", "kube-router netpol - 4IA2OSFRMVNDXBVV", "-j", "KUBE-ROUTER-INPUT"}},
		{`-N KUBE-FIREWALL`, []string{"-N", "KUBE-FIREWALL"}},
		{`-A X -m comment --comment "say \"hi\"" -j Y`, []string{"-A", "X", "-m", "comment", "--comment", `say "hi"`, "-j", "Y"}},
		{`-A X -m comment --comment "" -j Y`, []string{"-A", "X", "-m", "comment", "--comment", "", "-j", "Y"}},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, ruleFields(tc.line)); diff != "" {
			t.Errorf("ruleFields(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}
