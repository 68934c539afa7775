package devcluster

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// containerd gets overlayfs where the state dir can hold an overlay's upper directory, and native
// where it cannot: inside an overlay itself (a state dir in a container's root filesystem).
func TestContainerdSnapshotter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlay needs root (CI runs as root)")
	}
	dir := t.TempDir()
	got, err := containerdSnapshotter(filepath.Join(dir, "containerd"))
	if err != nil || got != "overlayfs" {
		t.Fatalf("on %s: snapshotter %q, %v; want overlayfs", dir, got, err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "containerd")); len(left) != 0 {
		t.Fatalf("the probe left %v behind", left)
	}
	outer := filepath.Join(dir, "outer")
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(outer, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(outer, "merged")
	opts := "lowerdir=" + filepath.Join(outer, "lower") + ",upperdir=" + filepath.Join(outer, "upper") + ",workdir=" + filepath.Join(outer, "work")
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(merged, unix.MNT_DETACH) })
	if got, err := containerdSnapshotter(filepath.Join(merged, "containerd")); err != nil || got != "native" {
		t.Fatalf("inside an overlay: snapshotter %q, %v; want native", got, err)
	}
}
