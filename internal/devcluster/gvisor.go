package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GVisorRuntimeClass is the RuntimeClass that runs pods under gVisor: a pod opts in with
// runtimeClassName: gvisor.
const GVisorRuntimeClass = "gvisor"

// gvisorHandler is containerd's name for the runsc runtime, the RuntimeClass's handler.
const gvisorHandler = "runsc"

// gvisorOverhead is what a pod under gVisor costs beyond its containers: the shim, the gofer,
// the sandbox (the Sentry) and its page cache. Measured on the dev node with hack/bench-gvisor
// (docs/performance.md): an idle sandboxd pod's processes add about this much PSS over runc's.
// An idle sandbox costs no CPU worth reserving, so the overhead is memory only: a CPU overhead
// would only shrink how many sandboxes the two-core dev node schedules.
var gvisorOverhead = corev1.ResourceList{
	corev1.ResourceMemory: resource.MustParse("128Mi"),
}

// gvisorRuntimeClass is RuntimeClass gvisor with its overhead, so that the scheduler and the
// kubelet count what each gVisor pod costs the node.
func gvisorRuntimeClass() *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: GVisorRuntimeClass, Labels: map[string]string{"app.kubernetes.io/managed-by": fieldManager}},
		Handler:    gvisorHandler,
		Overhead:   &nodev1.Overhead{PodFixed: gvisorOverhead},
	}
}

// runscConfigPath is the shim's configuration file; it exists exactly when the cluster was
// brought up with gVisor, which is how `status` tells.
func (c Config) runscConfigPath() string { return c.path("containerd", "runsc.toml") }

// runscConfig renders the runsc shim's configuration: which runsc to run and on which platform.
// systrap needs no KVM. The shim reads it at each container create. A restore from a memory
// checkpoint (snapshots.paddock.dev/restore-from) goes into a new Pod, whose pause container's
// spec differs from the checkpointed one by design (dev.gvisor.spec.cgroup-parent names the Pod's
// UID), so runsc's restore-time spec check only warns instead of refusing.
//
// systrap's fast path is off: with it, a Sentry waiting for its stub threads (and a stub waiting
// for the Sentry) spins on a CPU instead of sleeping, which pays on a machine with idle CPUs for
// one sandbox. A node of Paddock's runs dozens of members on a few CPUs, and a claim wakes its
// member while the others start or serve: on the 2-core dev node, 100 warm creates at 20/s cost
// the members 57 ms of CPU per create with it off against 102 ms with it on, and at 0.5/s the
// first command was no slower (docs/performance/results.md, "Where a warm create's CPU goes").
func runscConfig(runsc string) string {
	return fmt.Sprintf(`binary_name = %q

[runsc_config]
  platform = "systrap"
  systrap-disable-fast-path = "true"
  restore-spec-validation = "warning"
`, runsc)
}

// ensureGVisorRuntimeClass creates RuntimeClass gvisor when the cluster runs gVisor and removes
// it when it does not, so that no pod is scheduled onto a handler containerd lacks.
func (cl *cluster) ensureGVisorRuntimeClass(ctx context.Context) (string, bool, error) {
	rcs := cl.client.NodeV1().RuntimeClasses()
	if !cl.cfg.GVisor {
		err := rcs.Delete(ctx, GVisorRuntimeClass, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "off (--gvisor=false)", false, nil
		case err != nil:
			return "", false, fmt.Errorf("delete RuntimeClass %s: %w", GVisorRuntimeClass, err)
		}
		return "off (--gvisor=false); RuntimeClass " + GVisorRuntimeClass + " deleted", true, nil
	}
	want := gvisorRuntimeClass()
	got, err := rcs.Get(ctx, GVisorRuntimeClass, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := rcs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return "", false, fmt.Errorf("create RuntimeClass %s: %w", GVisorRuntimeClass, err)
		}
		return fmt.Sprintf("RuntimeClass %s (handler %s, overhead %s) created", GVisorRuntimeClass, gvisorHandler, overheadString()), true, nil
	case err != nil:
		return "", false, fmt.Errorf("get RuntimeClass %s: %w", GVisorRuntimeClass, err)
	}
	// Handler and overhead are immutable: a RuntimeClass left by an older up is replaced.
	if got.Handler != want.Handler || got.Overhead == nil || !sameResources(got.Overhead.PodFixed, want.Overhead.PodFixed) {
		if err := rcs.Delete(ctx, GVisorRuntimeClass, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return "", false, fmt.Errorf("replace RuntimeClass %s: %w", GVisorRuntimeClass, err)
		}
		if _, err := rcs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return "", false, fmt.Errorf("replace RuntimeClass %s: %w", GVisorRuntimeClass, err)
		}
		return fmt.Sprintf("RuntimeClass %s (handler %s, overhead %s) replaced", GVisorRuntimeClass, gvisorHandler, overheadString()), true, nil
	}
	return fmt.Sprintf("RuntimeClass %s (handler %s) exists", GVisorRuntimeClass, gvisorHandler), false, nil
}

func overheadString() string { return "memory " + gvisorOverhead.Memory().String() }

func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if w, ok := b[name]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

var binaryNameLine = regexp.MustCompile(`(?m)^binary_name = "([^"]+)"$`)

// gvisorStatus reports whether gVisor is configured and usable: the shim's configuration names
// an executable runsc, and RuntimeClass gvisor exists. A cluster brought up with --gvisor=false
// reports it as off, which is healthy.
func (cl *cluster) gvisorStatus(ctx context.Context) ComponentStatus {
	st := ComponentStatus{Name: "gvisor"}
	data, err := os.ReadFile(cl.cfg.runscConfigPath())
	if errors.Is(err, os.ErrNotExist) {
		st.Ready, st.Detail = true, "off (up ran with --gvisor=false)"
		return st
	}
	if err != nil {
		st.Detail = err.Error()
		return st
	}
	m := binaryNameLine.FindSubmatch(data)
	if m == nil {
		st.Detail = cl.cfg.runscConfigPath() + " names no runsc binary; run paddock dev up"
		return st
	}
	runsc := string(m[1])
	if fi, err := os.Stat(runsc); err != nil || fi.Mode()&0o111 == 0 {
		st.Detail = fmt.Sprintf("runsc %s is missing or not executable; run paddock dev up", runsc)
		return st
	}
	if cl.client == nil {
		st.Detail = "no API client to check RuntimeClass " + GVisorRuntimeClass
		return st
	}
	rc, err := cl.client.NodeV1().RuntimeClasses().Get(ctx, GVisorRuntimeClass, metav1.GetOptions{})
	if err != nil {
		st.Detail = fmt.Sprintf("RuntimeClass %s: %v; run paddock dev up", GVisorRuntimeClass, err)
		return st
	}
	st.Ready = true
	st.Detail = fmt.Sprintf("RuntimeClass %s (handler %s), runsc %s", rc.Name, rc.Handler, filepath.Dir(runsc))
	return st
}

// runscStateRoot is where gVisor's shim keeps runsc's state (its default root; a root under the
// state dir would make the shim's socket paths too long for a Unix socket).
const runscStateRoot = "/run/containerd/runsc"

// removeRunscState removes what gVisor's shim leaves in root once every sandbox is gone: its
// placeholder network namespace per containerd namespace (bind mounts of an nsfs file, possibly
// stacked, all unmounted first), then the directories if they are empty. Anything else there (a
// sandbox of another containerd) is left alone.
func removeRunscState(root string) error {
	namespaces, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range namespaces {
		dir := filepath.Join(root, ns.Name())
		netns := filepath.Join(dir, "null-netns")
		if err := unmountAll(netns); err != nil {
			errs = append(errs, err)
		}
		if err := os.Remove(netns); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		removeIfEmpty(dir)
	}
	removeIfEmpty(root)
	removeIfEmpty(filepath.Dir(root))
	return errors.Join(errs...)
}

// maxStackedMounts bounds unmountAll: far more than concurrent sandbox creations ever stack.
const maxStackedMounts = 1024

// unmountAll unmounts every mount stacked on path. runsc does not serialize creating the null
// network namespace, so sandboxes started at once each bind-mount it over the other, and one
// unmount leaves the file busy. EINVAL (no longer a mount point) or ENOENT ends the loop.
func unmountAll(path string) error {
	for range maxStackedMounts {
		err := syscall.Unmount(path, syscall.MNT_DETACH)
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still a mount point after %d unmounts", path, maxStackedMounts)
}

// removeIfEmpty removes dir when it holds nothing; rmdir fails on a non-empty one, which is fine.
func removeIfEmpty(dir string) { _ = syscall.Rmdir(dir) }
