package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/devcluster"
)

// testControlPlaneCgroup: etcd and kube-apiserver run in devcluster.ControlPlaneCgroup, whose CPU
// weight is above the kubelet's root (where every Pod runs), and the kubelet and containerd,
// which start the pools' members, do not (docs/design/warm-refill.md).
func testControlPlaneCgroup(t *testing.T) {
	mount, weightFile := "/sys/fs/cgroup/cpu", "cpu.shares"
	if _, err := os.Stat(filepath.Join(mount, weightFile)); err != nil {
		mount, weightFile = "/sys/fs/cgroup", "cpu.weight" // cgroup v2
	}
	weight := func(cgroup string) int {
		b, err := os.ReadFile(filepath.Join(mount, cgroup, weightFile))
		if err != nil {
			t.Fatalf("reading the CPU weight of %s: %v", cgroup, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s of %s: %v", weightFile, cgroup, err)
		}
		return n
	}
	if cp, kubelet := weight(devcluster.ControlPlaneCgroup), weight(devcluster.KubeletCgroupRoot); cp <= kubelet {
		t.Errorf("%s weighs %d, not above the kubelet's root %s (%d)", devcluster.ControlPlaneCgroup, cp, devcluster.KubeletCgroupRoot, kubelet)
	}
	for component, want := range map[string]bool{"etcd": true, "kube-apiserver": true, "kubelet": false, "containerd": false} {
		pid := componentPid(t, component)
		got := cpuCgroup(t, pid)
		if in := got == devcluster.ControlPlaneCgroup; in != want {
			t.Errorf("%s (pid %d) runs in cpu cgroup %s; in the control plane's: %v, want %v", component, pid, got, in, want)
		}
	}
}

// componentPid is the pid a dev cluster component's pid file records ("pid start-time").
func componentPid(t *testing.T, component string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suite.stateDir, "run", component+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatalf("pid file of %s: %v", component, err)
	}
	return pid
}

// cpuCgroup is the cgroup of pid in the hierarchy with the CPU controller (v1) or the unified one.
func cpuCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				return parts[2]
			}
		}
		if parts[0] == "0" {
			unified = parts[2]
		}
	}
	return unified
}
