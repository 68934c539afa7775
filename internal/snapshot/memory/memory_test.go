package memory

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeRunsc writes a stand-in for runsc that records its arguments and writes size bytes of
// pages into --image-path (or fails with a message when size is negative). The real runsc is
// exercised end to end by TestCluster/suspend-memory.
func fakeRunsc(t *testing.T, size int) (runsc, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	script := `#!/bin/sh
echo "$@" > ` + argsFile + `
for a in "$@"; do case "$a" in --image-path=*) img="${a#--image-path=}";; esac; done
if [ ` + itoa(size) + ` -lt 0 ]; then echo "container not found" >&2; exit 1; fi
head -c ` + itoa(max(size, 0)) + ` /dev/zero > "$img/pages.img"
echo meta > "$img/checkpoint.img"
`
	runsc = filepath.Join(dir, "runsc")
	if err := os.WriteFile(runsc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return runsc, argsFile
}

func itoa(n int) string { return strconv.Itoa(max(n, -1)) }

func options(t *testing.T, runsc string) CheckpointOptions {
	return CheckpointOptions{Runsc: runsc, RunscRoot: "/run/containerd/runsc/k8s.io", ContainerID: "abc123",
		Dir: filepath.Join(t.TempDir(), "memory"), Name: "0c5a4b6e-1111-2222-3333-444455556666", Namespace: "team-a", MaxBytes: 1 << 20}
}

func TestCheckpointWritesARootOnlyImageBoundToItsNamespace(t *testing.T) {
	runsc, argsFile := fakeRunsc(t, 4096)
	o := options(t, runsc)
	res, err := Checkpoint(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes < 4096 {
		t.Errorf("result reports %d bytes, want at least the 4096 of pages.img", res.Bytes)
	}
	args, _ := os.ReadFile(argsFile)
	img := filepath.Join(o.Dir, o.Name)
	if want := "--root=/run/containerd/runsc/k8s.io checkpoint --leave-running --compression=none --image-path=" + img + " abc123"; strings.TrimSpace(string(args)) != want {
		t.Errorf("runsc ran with %q, want %q", args, want)
	}
	for path, mode := range map[string]os.FileMode{o.Dir: 0o700, img: 0o700} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v; want %v", path, err, fi.Mode().Perm(), mode)
		}
	}
	ns, err := os.ReadFile(filepath.Join(img, NamespaceFile))
	if err != nil || string(ns) != "team-a" {
		t.Errorf("namespace file: %q, %v; want team-a", ns, err)
	}
	if err := Forget(o.Dir, o.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("the image is still there after Forget: %v", err)
	}
	if err := Forget(o.Dir, o.Name); err != nil {
		t.Errorf("forgetting an image that is gone: %v, want nothing to do", err)
	}
}

func TestCheckpointAboveTheCapIsRemoved(t *testing.T) {
	runsc, _ := fakeRunsc(t, 8192)
	o := options(t, runsc)
	o.MaxBytes = 4096
	_, err := Checkpoint(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "above this checkpoint's cap of 4096 bytes") {
		t.Fatalf("a checkpoint of 8 KiB with a cap of 4 KiB: %v, want refused naming the cap", err)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, o.Name)); !os.IsNotExist(err) {
		t.Errorf("the image above the cap is still on the node: %v", err)
	}
}

func TestCheckpointFailureLeavesNoImage(t *testing.T) {
	runsc, _ := fakeRunsc(t, -1)
	o := options(t, runsc)
	// A partial image of an earlier, killed attempt is replaced, then removed with the failure.
	if err := os.MkdirAll(filepath.Join(o.Dir, o.Name), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Checkpoint(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "container not found") {
		t.Fatalf("a failing runsc: %v, want its stderr in the error", err)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, o.Name)); !os.IsNotExist(err) {
		t.Errorf("a failed checkpoint left its image directory: %v", err)
	}
}

func TestCheckpointRefusesBadInput(t *testing.T) {
	runsc, _ := fakeRunsc(t, 1)
	for name, mutate := range map[string]func(*CheckpointOptions){
		"--name":         func(o *CheckpointOptions) { o.Name = "../etc" },
		"--container-id": func(o *CheckpointOptions) { o.ContainerID = "" },
		"--namespace":    func(o *CheckpointOptions) { o.Namespace = "" },
		"--max-bytes":    func(o *CheckpointOptions) { o.MaxBytes = 0 },
	} {
		o := options(t, runsc)
		mutate(&o)
		if _, err := Checkpoint(context.Background(), o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("bad %s: %v, want an error naming the flag", name, err)
		}
	}
	if err := Forget(t.TempDir(), "a/../../b"); err == nil {
		t.Error("Forget of a name with a path: nil error, want refused")
	}
}

func TestCheckpointRefusesAnImageDirThroughASymlink(t *testing.T) {
	runsc, _ := fakeRunsc(t, 1)
	o := options(t, runsc)
	target := t.TempDir()
	if err := os.Symlink(target, o.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkpoint(context.Background(), o); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("image directory through a symlink: %v, want refused", err)
	}
}
