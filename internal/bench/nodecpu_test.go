package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProc writes a /proc with the given CPU line and processes (pid -> comm, cgroup, ticks).
type fakeProcess struct {
	comm, cgroup                        string
	utime, stime, cutime, cstime, start int
}

func writeFakeProc(t *testing.T, root string, cpuLine string, procs map[int]fakeProcess) {
	t.Helper()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte(cpuLine+"\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for pid, p := range procs {
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Fields 3..22 of /proc/PID/stat; the comm holds a space and a ')' as a real one may.
		stat := fmt.Sprintf("%d (%s) S 1 1 1 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0 %d 0 0\n", pid, p.comm+" x)", p.utime, p.stime, p.cutime, p.cstime, p.start)
		files := map[string]string{"stat": stat, "comm": p.comm + "\n", "cgroup": p.cgroup}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func v1(cpu string) string { return "4:memory:/x\n2:cpuacct:/\n1:cpu:" + cpu + "\n0::/\n" }

func TestNodeCPUAttributesByComponent(t *testing.T) {
	root := filepath.Join(t.TempDir(), "proc")
	pod := "/paddock-dev/kubepods/besteffort/pod1234"
	procs := map[int]fakeProcess{
		10: {comm: "kube-apiserver", cgroup: v1("/paddock-dev-control-plane"), utime: 100, stime: 50, start: 5},
		11: {comm: "containerd-shim", cgroup: v1("/"), utime: 10, cutime: 40, start: 7},
		12: {comm: "exe", cgroup: v1(pod), utime: 20, start: 9},
		13: {comm: "paddock-router", cgroup: v1("/paddock-dev/kubepods/burstable/pod9/c1"), utime: 30, start: 9},
		14: {comm: "kubelet", cgroup: v1("/"), utime: 5, start: 3},
		16: {comm: "kube-scheduler", cgroup: v1("/"), utime: 5, start: 3},
	}
	writeFakeProc(t, root, "cpu  1000 0 500 9000 100 0 20 0 0 0", procs)
	a, err := readCPUSnapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	// In the window: the API server uses 1.5 s; the shim 0.2 s itself and reaps runsc commands
	// that used 0.8 s; a member's Sentry 0.5 s; pid 14 exits and its pid is reused by a new
	// member process that used 0.3 s in all; a new router thread group appears with 0.1 s.
	procs[10] = fakeProcess{comm: "kube-apiserver", cgroup: v1("/paddock-dev-control-plane"), utime: 200, stime: 100, start: 5}
	procs[11] = fakeProcess{comm: "containerd-shim", cgroup: v1("/"), utime: 30, cutime: 120, start: 7}
	procs[12] = fakeProcess{comm: "exe", cgroup: v1(pod), utime: 70, start: 9}
	procs[14] = fakeProcess{comm: "sandboxd", cgroup: v1(pod), utime: 30, start: 400}
	procs[16] = fakeProcess{comm: "kube-scheduler", cgroup: v1("/"), utime: 25, start: 3}
	procs[15] = fakeProcess{comm: "paddock-router", cgroup: "0::/kubepods.slice/kubepods-pod7.slice\n", utime: 10, start: 401}
	writeFakeProc(t, root, "cpu  1300 0 600 9500 300 0 40 0 0 0", procs)
	b, err := readCPUSnapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	got := nodeCPU(a, b)
	want := map[string]float64{
		ComponentAPIServer: 1.5,
		ComponentShims:     1.0,
		ComponentMembers:   0.8,
		ComponentPaddock:   0.1,
		ComponentOther:     0.2,
	}
	if len(got.Components) != len(want) {
		t.Errorf("components %v, want %v", got.Components, want)
	}
	for c, w := range want {
		if g := got.Components[c]; g < w-1e-9 || g > w+1e-9 {
			t.Errorf("%s: %v core-seconds, want %v (all: %v)", c, g, w, got.Components)
		}
	}
	// user 300 + system 100 + softirq 20 ticks; idle and iowait left out.
	if got.Busy < 4.2-1e-9 || got.Busy > 4.2+1e-9 {
		t.Errorf("busy %v core-seconds, want 4.2", got.Busy)
	}
	line := got.perUnit(2)
	for _, part := range []string{"busy 2100", "(other: kube-scheduler 100)", ComponentMembers + " 400", ComponentAPIServer + " 750", ComponentShims + " 500"} {
		if !strings.Contains(line, part) {
			t.Errorf("per create %q lacks %q", line, part)
		}
	}
}

func TestComponentFromCommandAndCgroup(t *testing.T) {
	for _, tc := range []struct{ comm, cgroup, want string }{
		{"etcd", "/paddock-dev-control-plane", ComponentEtcd},
		{"kubelet", "/", ComponentKubelet},
		{"containerd", "/", ComponentContainerd},
		{"runsc", "/", ComponentShims},
		{"kube-router-v2.", "/", ComponentNetpol},
		{"exe", "/paddock-dev/kubepods/besteffort/podA", ComponentMembers},
		{"sandboxd", "/kubepods/burstable/podB/abc", ComponentMembers},
		{"paddock-control", "/paddock-dev/kubepods/burstable/podC", ComponentPaddock},
		// Paddock's binary name outside a Pod (the dev cluster's registry) is not its Pods' CPU.
		{"paddock", "/", ComponentOther},
		{"bash", "/", ComponentOther},
	} {
		if got := component(tc.comm, tc.cgroup); got != tc.want {
			t.Errorf("component(%q, %q) = %q, want %q", tc.comm, tc.cgroup, got, tc.want)
		}
	}
	if got := cpuCgroup("12:cpu,cpuacct:/a/b\n0::/c\n"); got != "/a/b" {
		t.Errorf("cgroup v1 cpu,cpuacct: %q", got)
	}
	if got := cpuCgroup("0::/kubepods.slice/x\n"); got != "/kubepods.slice/x" {
		t.Errorf("cgroup v2: %q", got)
	}
}
