package devcluster

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeMountinfo points cgroupMountsFile at a file of lines for the test's duration.
func fakeMountinfo(t *testing.T, lines ...string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := cgroupMountsFile
	cgroupMountsFile = f
	t.Cleanup(func() { cgroupMountsFile = old })
}

func TestCgroupHierarchies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string
		want    []string
		wantErr string
	}{{
		name: "cgroup v1 with an empty v2 mount (hybrid): all of them, as the kubelet uses the v2 mount too",
		lines: []string{
			"25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755",
			"26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu",
			"27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
			"28 25 0:25 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd",
			"29 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
			"30 1 8:1 / /data\\040dir rw - ext4 /dev/sda1 rw",
		},
		want: []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"},
	}, {
		name:  "cgroup v2 only: its mount",
		lines: []string{"25 24 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"},
		want:  []string{"/sys/fs/cgroup"},
	}, {
		name:    "no cgroup filesystem: an error naming what is missing",
		lines:   []string{"30 1 8:1 / / rw - ext4 /dev/sda1 rw"},
		wantErr: "no cgroup filesystem is mounted",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fakeMountinfo(t, tc.lines...)
			got, err := cgroupHierarchies()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("hierarchies (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubeletCgroupRoot creates the root in stand-in hierarchies (plain directories): the cpuset
// one gets its parent's CPUs and memory nodes, the cpu one a weight of 1024 per CPU, the others
// nothing; a second run changes nothing; removal takes the cgroups the kubelet made below it.
func TestKubeletCgroupRoot(t *testing.T) {
	dir := t.TempDir()
	cpuset, cpu, memory := filepath.Join(dir, "cpuset"), filepath.Join(dir, "cpu"), filepath.Join(dir, "memory")
	for f, content := range map[string]string{
		filepath.Join(cpuset, "cpuset.cpus"): "0-1\n",
		filepath.Join(cpuset, "cpuset.mems"): "0\n",
		filepath.Join(cpu, "cpu.shares"):     "1024\n",
		filepath.Join(memory, "tasks"):       "",
	} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fakeMountinfo(t,
		"26 25 0:23 / "+cpuset+" rw - cgroup cgroup rw,cpuset",
		"27 25 0:24 / "+cpu+" rw - cgroup cgroup rw,cpu",
		"28 25 0:25 / "+memory+" rw - cgroup cgroup rw,memory")

	if _, created, err := ensureKubeletCgroupRoot(); err != nil || !created {
		t.Fatalf("first ensure: created %v, %v", created, err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for file, want := range map[string]string{
		filepath.Join(cpuset, KubeletCgroupRoot, "cpuset.cpus"): "0-1\n",
		filepath.Join(cpuset, KubeletCgroupRoot, "cpuset.mems"): "0\n",
		filepath.Join(cpu, KubeletCgroupRoot, "cpu.shares"):     strconv.Itoa(1024 * runtime.NumCPU()),
	} {
		if got := read(file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(memory, KubeletCgroupRoot)); err != nil || len(entries) != 0 {
		t.Errorf("memory root: %v, %v; want an empty directory", entries, err)
	}
	if _, created, err := ensureKubeletCgroupRoot(); err != nil || created {
		t.Fatalf("second ensure: created %v, %v; want nothing done", created, err)
	}

	// What the kubelet makes below the root in the memory hierarchy; removing the cpuset and
	// cpu roots fails on the stand-ins' regular files, which cgroupfs does not have.
	if err := os.MkdirAll(filepath.Join(memory, KubeletCgroupRoot, "kubepods", "burstable", "pod1"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := removeKubeletCgroupRoot()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(cpuset, KubeletCgroupRoot)) {
		t.Errorf("removal error %v, want one naming the cpuset root that still holds files", err)
	}
	if _, err := os.Stat(filepath.Join(memory, KubeletCgroupRoot)); !os.IsNotExist(err) {
		t.Errorf("the memory root is still there: %v", err)
	}
}

// TestControlPlaneCgroup creates the control plane's cgroup in stand-in hierarchies (plain
// directories) with its weight, moves a pid into it, and removes it: on cgroup v1 (cpu.shares) and
// on cgroup v2 (cpu.weight, when the root delegates the cpu controller); a host without a CPU
// controller gets no cgroup, and joining it is a no-op.
func TestControlPlaneCgroup(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      map[string]string // relative to the hierarchy
		fstype     string
		weightFile string
		weight     int
	}{{
		name: "cgroup v1", files: map[string]string{"cpu.shares": "1024\n"}, fstype: "cgroup cgroup rw,cpu",
		weightFile: "cpu.shares", weight: 4 * 1024 * runtime.NumCPU(),
	}, {
		name: "cgroup v2 with the cpu controller", files: map[string]string{"cgroup.subtree_control": "cpuset cpu io memory pids\n"}, fstype: "cgroup2 cgroup2 rw",
		weightFile: "cpu.weight", weight: min(10000, 400*runtime.NumCPU()),
	}, {
		name: "cgroup v2 without it", files: map[string]string{"cgroup.subtree_control": "memory pids\n"}, fstype: "cgroup2 cgroup2 rw",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := t.TempDir()
			for f, content := range tc.files {
				if err := os.WriteFile(filepath.Join(m, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fakeMountinfo(t, "26 25 0:23 / "+m+" rw - "+tc.fstype)
			dir := filepath.Join(m, ControlPlaneCgroup)

			what, created, err := ensureControlPlaneCgroup()
			if err != nil {
				t.Fatal(err)
			}
			if tc.weightFile == "" {
				if created || !strings.Contains(what, "no cpu controller") {
					t.Fatalf("ensure: %q, created %v; want nothing made on a host without a CPU controller", what, created)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Fatalf("%s exists (%v); want no cgroup", dir, err)
				}
				if err := joinControlPlaneCgroup(42); err != nil {
					t.Fatalf("join without a CPU controller: %v, want a no-op", err)
				}
				return
			}
			if !created {
				t.Fatalf("first ensure: %q, want the cgroup created", what)
			}
			got, err := os.ReadFile(filepath.Join(dir, tc.weightFile))
			if err != nil || string(got) != strconv.Itoa(tc.weight) {
				t.Fatalf("%s = %q (%v), want %d", tc.weightFile, got, err, tc.weight)
			}
			if _, created, err := ensureControlPlaneCgroup(); err != nil || created {
				t.Fatalf("second ensure: created %v, %v; want the existing cgroup kept", created, err)
			}
			if err := joinControlPlaneCgroup(42); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err != nil || string(got) != "42" {
				t.Fatalf("cgroup.procs = %q (%v), want the pid", got, err)
			}
			// cgroupfs has no regular files to delete; the stand-in does, so removal names the
			// cgroup and what it holds, as it would for a cgroup that still holds a process.
			if err := removeControlPlaneCgroup(); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), `"42"`) {
				t.Fatalf("removal of a cgroup that still holds pid 42: %v, want an error naming it and the pid", err)
			}
			for _, f := range []string{tc.weightFile, "cgroup.procs"} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
			if err := removeControlPlaneCgroup(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s still exists after removal: %v", dir, err)
			}
			if err := removeControlPlaneCgroup(); err != nil {
				t.Fatalf("second removal: %v, want nothing to do", err)
			}
		})
	}
}
