package capture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// Options say what to capture and where to push it; the controller writes them on the capture
// Pod's command line.
type Options struct {
	ContainerID string
	// BaseImage is the image the container runs, by digest when known.
	BaseImage string
	// Target is the repository and tag to push to.
	Target string
	// Insecure pulls and pushes over plain HTTP.
	Insecure bool
	// WorkDir holds the layer while it is pushed.
	WorkDir string
	Layer   layer.Options
	// Runsc is the node's runsc binary, which exports a gVisor container's root filesystem
	// writes (`runsc tar rootfs-upper`); empty refuses gVisor containers.
	Runsc string
	// RunscRoot is runsc's state directory for containerd's CRI namespace.
	RunscRoot string
	// Volumes are captured in the same pause as the root filesystem, into a second layer.
	Volumes []snapshot.Volume
	// HostRoot is the node's root directory, where the volumes' host paths are resolved;
	// DefaultHostRoot when empty.
	HostRoot string
	// RestoreBinary is copied into the volume layer for the restore init container; this
	// binary (/proc/self/exe) when empty.
	RestoreBinary string
}

// DefaultHostRoot is where the capture Pod mounts the node's root (read-only) when it reads
// volumes.
const DefaultHostRoot = "/host"

// DefaultRunscRoot is where gVisor's containerd shim keeps runsc's state for the CRI's
// containers: its default root plus the containerd namespace.
const DefaultRunscRoot = "/run/containerd/runsc/" + criNamespace

// resumeTimeout bounds one resume call; it runs on a context of its own, so that an ended
// capture context cannot stop it.
const resumeTimeout = 30 * time.Second

// Run captures o.ContainerID and pushes the result. It never returns with the container left
// paused by it, unless containerd refuses every resume (then the Result says so).
func Run(ctx context.Context, rt Runtime, o Options) snapshot.Result {
	res, err := run(ctx, rt, o)
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func run(ctx context.Context, rt Runtime, o Options) (snapshot.Result, error) {
	var res snapshot.Result
	target, err := name.NewTag(o.Target, nameOpts(o)...)
	if err != nil {
		return res, fmt.Errorf("--target %q: %w", o.Target, err)
	}
	runtimeName, snapshotter, err := rt.Container(ctx, o.ContainerID)
	if err != nil {
		return res, err
	}
	f, err := os.CreateTemp(o.WorkDir, "layer-*.tar")
	if err != nil {
		return res, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var copyLayer func() error
	if strings.Contains(runtimeName, "runsc") {
		if o.Runsc == "" {
			return res, fmt.Errorf("container %s runs under %s, and no runsc binary was given (--runsc); start the controller with --snapshot-runsc naming the nodes' runsc", o.ContainerID, runtimeName)
		}
		copyLayer = func() error { return runscUpper(ctx, o, f) }
	} else {
		mounts, err := rt.Mounts(ctx, snapshotter, o.ContainerID)
		if err != nil {
			return res, err
		}
		upper, err := UpperDir(mounts)
		if err != nil {
			return res, fmt.Errorf("container %s (snapshotter %s): %w", o.ContainerID, snapshotter, err)
		}
		copyLayer = func() error {
			_, err := layer.FromUpperDir(upper, f, o.Layer)
			return err
		}
	}
	layers := []string{f.Name()}
	if len(o.Volumes) > 0 {
		vf, copyVolumes, err := prepareVolumes(ctx, rt, o)
		if err != nil {
			return res, err
		}
		defer os.Remove(vf.Name())
		defer vf.Close()
		layers = append(layers, vf.Name())
		copyRootfs := copyLayer
		copyLayer = func() error {
			if err := copyRootfs(); err != nil {
				return err
			}
			return copyVolumes()
		}
	}
	paused, err := whilePaused(ctx, rt, o.ContainerID, copyLayer)
	res.PausedMilliseconds = paused.Milliseconds()
	if err != nil {
		return res, err
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	ref, size, err := push(ctx, o, layers, target)
	res.Image, res.SizeBytes = ref, size
	return res, err
}

// whilePaused pauses id, runs copy and resumes id: when copy returns, and at once if ctx ends
// first (copy's result is then discarded). It reports how long id was paused.
func whilePaused(ctx context.Context, rt Runtime, id string, copy func() error) (time.Duration, error) {
	var (
		once      sync.Once
		resumeErr error
		start     time.Time
		paused    time.Duration
	)
	resume := func() {
		once.Do(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resumeTimeout)
			defer cancel()
			resumeErr = rt.Resume(rctx, id)
			paused = time.Since(start)
		})
	}
	start = time.Now()
	if err := rt.Pause(ctx, id); err != nil {
		// A pause that failed half way must not leave the container frozen.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resumeTimeout)
		defer cancel()
		return 0, errors.Join(fmt.Errorf("pausing container %s: %w", id, err), Resume(rctx, rt, id))
	}
	stop := context.AfterFunc(ctx, resume)
	defer stop()
	err := copy()
	resume()
	if resumeErr != nil {
		err = errors.Join(err, fmt.Errorf("resuming container %s: %w", id, resumeErr))
	}
	if ctx.Err() != nil {
		err = errors.Join(err, fmt.Errorf("capture stopped: %w", context.Cause(ctx)))
	}
	return paused, err
}

// UpperDir finds the upper directory in the overlay mount of a container's root filesystem.
func UpperDir(mounts []Mount) (string, error) {
	if len(mounts) != 1 || mounts[0].Type != "overlay" {
		return "", fmt.Errorf("the root filesystem is not one overlay mount (%d mounts); only containerd's overlayfs snapshotter is supported", len(mounts))
	}
	for _, opt := range mounts[0].Options {
		if dir, ok := strings.CutPrefix(opt, "upperdir="); ok && strings.HasPrefix(dir, "/") {
			return dir, nil
		}
	}
	return "", errors.New("the overlay mount has no upperdir option (a read-only root filesystem has nothing to capture)")
}

// prepareVolumes opens the volumes' host directories and starts their layer (the restore
// binary) before the pause; copyVolumes, run while paused, adds every volume and ends the layer.
func prepareVolumes(ctx context.Context, rt Runtime, o Options) (*os.File, func() error, error) {
	spec, err := rt.Spec(ctx, o.ContainerID)
	if err != nil {
		return nil, nil, err
	}
	mounts, err := specMounts(spec)
	if err != nil {
		return nil, nil, err
	}
	fds, err := openVolumes(cmp.Or(o.HostRoot, DefaultHostRoot), mounts, o.Volumes)
	if err != nil {
		return nil, nil, err
	}
	vf, err := os.CreateTemp(o.WorkDir, "volumes-*.tar")
	if err != nil {
		closeAll(fds)
		return nil, nil, err
	}
	lo := o.Layer
	lo.Exclude = nil
	v, err := startVolumeLayer(vf, cmp.Or(o.RestoreBinary, "/proc/self/exe"), lo)
	if err != nil {
		closeAll(fds)
		vf.Close()
		os.Remove(vf.Name())
		return nil, nil, err
	}
	copyVolumes := func() error {
		defer closeAll(fds)
		for i, vol := range o.Volumes {
			if err := v.AddFD(vol.Name, fds[i]); err != nil {
				return fmt.Errorf("volume %s: %w", vol.Name, err)
			}
		}
		if err := v.Close(); err != nil {
			return err
		}
		return vf.Close()
	}
	return vf, copyVolumes, nil
}

// push appends the layers at paths to the base image and pushes it to target; it returns the
// image by digest and the added layers' stored (compressed) size.
func push(ctx context.Context, o Options, paths []string, target name.Tag) (string, int64, error) {
	baseRef, err := name.ParseReference(o.BaseImage, nameOpts(o)...)
	if err != nil {
		return "", 0, fmt.Errorf("--base-image %q: %w", o.BaseImage, err)
	}
	base, err := remote.Image(baseRef, remote.WithContext(ctx))
	if err != nil {
		return "", 0, fmt.Errorf("reading base image %s: %w", baseRef, err)
	}
	var added []v1.Layer
	for _, p := range paths {
		l, err := tarball.LayerFromFile(p)
		if err != nil {
			return "", 0, err
		}
		added = append(added, l)
	}
	img, err := mutate.AppendLayers(base, added...)
	if err != nil {
		return "", 0, err
	}
	if err := remote.Write(target, img, remote.WithContext(ctx)); err != nil {
		return "", 0, fmt.Errorf("pushing %s: %w", target, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", 0, err
	}
	var size int64
	for _, l := range added {
		n, err := l.Size()
		if err != nil {
			return "", 0, err
		}
		size += n
	}
	return target.Context().Digest(digest.String()).String(), size, nil
}

func nameOpts(o Options) []name.Option {
	if o.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}
