package devcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// KubeletCgroupRoot is the cgroup the dev node's kubelet owns (its cgroupRoot): `up` creates it
// in every cgroup hierarchy, the kubelet puts its QoS cgroups (kubepods, burstable, besteffort)
// and one cgroup per pod below it, and `down` removes it. The kubelet runs with cgroupsPerQOS
// because it needs pod-level cgroups to resize a Pod in place (kubelet v1.37.2 panics on a resize
// without them).
const KubeletCgroupRoot = "/paddock-dev"

// cgroupMountsFile is where the hierarchies are found; a variable for the tests.
var cgroupMountsFile = "/proc/self/mountinfo"

// cgroupHierarchies returns the mount points of the host's cgroup hierarchies: every cgroup v1
// hierarchy (cpu, memory, name=systemd, ...) and cgroup v2 mount. On a hybrid host the kubelet's
// cgroup library makes its cgroups in the v2 mount too, though it has no controllers.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open(cgroupMountsFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: ID parent major:minor root mountpoint options... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if fstype := fields[sep+1]; fstype == "cgroup" || fstype == "cgroup2" {
			out = append(out, unescapeMountPath(fields[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup filesystem is mounted (see /proc/self/mountinfo); the kubelet needs one")
	}
	return out, nil
}

// ensureKubeletCgroupRoot creates KubeletCgroupRoot in every hierarchy. A new cpuset cgroup starts
// with no CPUs and no memory nodes, so it gets its parent's. On cgroup v1 the root's CPU weight
// (cpu.shares) is that of one busy process per CPU, the weight the kubelet gives its kubepods
// below: the pods together compete with the host's processes as the node's CPUs' worth, not as
// one process (the default 1024), whatever else runs on the machine.
func ensureKubeletCgroupRoot() (string, bool, error) {
	mounts, err := cgroupHierarchies()
	if err != nil {
		return "", false, err
	}
	created := false
	for _, m := range mounts {
		dir := filepath.Join(m, KubeletCgroupRoot)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", false, fmt.Errorf("create the kubelet's cgroup root: %w", err)
		}
		created = true
		for file, value := range cgroupRootSettings(m) {
			if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
				return "", false, fmt.Errorf("set %s of the kubelet's cgroup root %s: %w", file, dir, err)
			}
		}
	}
	return fmt.Sprintf("%s in %d hierarchies", KubeletCgroupRoot, len(mounts)), created, nil
}

// cgroupRootSettings returns what KubeletCgroupRoot is given in the hierarchy mounted at m,
// file by file: the parent's cpuset.cpus and cpuset.mems, and cpu.shares of 1024 per CPU, where
// the parent has those files.
func cgroupRootSettings(m string) map[string][]byte {
	out := map[string][]byte{}
	for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
		if parent, err := os.ReadFile(filepath.Join(m, file)); err == nil {
			out[file] = parent
		}
	}
	if _, err := os.Stat(filepath.Join(m, "cpu.shares")); err == nil {
		out["cpu.shares"] = []byte(strconv.Itoa(1024 * runtime.NumCPU()))
	}
	return out
}

// removeKubeletCgroupRoot removes KubeletCgroupRoot and every cgroup below it, deepest first. It
// runs once the kubelet, containerd and the shims are gone; a cgroup that still holds a process
// cannot be removed, and the error names it.
func removeKubeletCgroupRoot() error {
	mounts, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, KubeletCgroupRoot)
		var dirs []string
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// WalkDir lists parents before their children: remove in reverse.
		for _, d := range slices.Backward(dirs) {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				errs = append(errs, fmt.Errorf("remove cgroup %s (processes: %q): %w", d, strings.Fields(string(procs)), err))
			}
		}
	}
	return errors.Join(errs...)
}

// ControlPlaneCgroup is the cgroup, in the CPU hierarchy, that holds the dev cluster's etcd and
// kube-apiserver. A warm claim's critical path is API writes and watch deliveries; the refill's
// member starts run mostly outside the members' own cgroups (containerd, the shims, runsc's
// commands, all in the host's root cgroup), so on a small node they take the CPU the API server
// and etcd need (docs/design/warm-refill.md, "CPU priority for the control plane").
const ControlPlaneCgroup = "/paddock-dev-control-plane"

// controlPlaneCPUShares is the control plane cgroup's cgroup v1 weight: four busy processes per
// CPU. On cgroup v1 every process of the root cgroup competes with the weight of one (1024), and
// the kubelet's root with one per CPU, so the control plane wins its share even while a refill
// keeps dozens of runtime processes runnable. On cgroup v2, controlPlaneCPUWeight (default 100).
func controlPlaneCPUShares() int { return 4 * 1024 * runtime.NumCPU() }

func controlPlaneCPUWeight() int { return min(10000, 4*100*runtime.NumCPU()) }

// cpuHierarchy returns the mount point of the hierarchy that has the CPU controller and the
// file that sets a cgroup's weight there: cpu.shares (cgroup v1) or cpu.weight (cgroup v2, when
// its root delegates the cpu controller). Empty when the host has neither.
func cpuHierarchy() (mount, weightFile string, err error) {
	mounts, err := cgroupHierarchies()
	if err != nil {
		return "", "", err
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, "cpu.shares")); err == nil {
			return m, "cpu.shares", nil
		}
	}
	for _, m := range mounts {
		if b, err := os.ReadFile(filepath.Join(m, "cgroup.subtree_control")); err == nil && slices.Contains(strings.Fields(string(b)), "cpu") {
			return m, "cpu.weight", nil
		}
	}
	return "", "", nil
}

// ensureControlPlaneCgroup creates ControlPlaneCgroup with its CPU weight. A host without a CPU
// controller gets none, and the control plane shares the root cgroup as before.
func ensureControlPlaneCgroup() (string, bool, error) {
	m, weightFile, err := cpuHierarchy()
	if err != nil || m == "" {
		return "no cpu controller; the control plane runs in the root cgroup", false, err
	}
	dir := filepath.Join(m, ControlPlaneCgroup)
	weight := controlPlaneCPUShares()
	if weightFile == "cpu.weight" {
		weight = controlPlaneCPUWeight()
	}
	created := false
	if err := os.Mkdir(dir, 0o755); err == nil {
		created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return "", false, fmt.Errorf("create the control plane's cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, weightFile), []byte(strconv.Itoa(weight)), 0o644); err != nil {
		return "", false, fmt.Errorf("set %s of the control plane's cgroup %s: %w", weightFile, dir, err)
	}
	return fmt.Sprintf("%s %s=%d", dir, weightFile, weight), created, nil
}

// joinControlPlaneCgroup moves process pid (all its threads) into ControlPlaneCgroup; it does
// nothing when the host has no CPU controller or the cgroup was not made.
func joinControlPlaneCgroup(pid int) error {
	m, _, err := cpuHierarchy()
	if err != nil || m == "" {
		return err
	}
	procs := filepath.Join(m, ControlPlaneCgroup, "cgroup.procs")
	if _, err := os.Stat(filepath.Dir(procs)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("move pid %d into the control plane's cgroup %s: %w", pid, filepath.Dir(procs), err)
	}
	return nil
}

// removeControlPlaneCgroup removes ControlPlaneCgroup once etcd and the API server are gone.
func removeControlPlaneCgroup() error {
	m, _, err := cpuHierarchy()
	if err != nil || m == "" {
		return err
	}
	dir := filepath.Join(m, ControlPlaneCgroup)
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		return fmt.Errorf("remove cgroup %s (processes: %q): %w", dir, strings.Fields(string(procs)), err)
	}
	return nil
}
