package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
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
}

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
	paused, err := whilePaused(ctx, rt, o.ContainerID, copyLayer)
	res.PausedMilliseconds = paused.Milliseconds()
	if err != nil {
		return res, err
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	ref, size, err := push(ctx, o, f.Name(), target)
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

// push appends the layer at path to the base image and pushes it to target; it returns the
// image by digest and the layer's stored (compressed) size.
func push(ctx context.Context, o Options, path string, target name.Tag) (string, int64, error) {
	baseRef, err := name.ParseReference(o.BaseImage, nameOpts(o)...)
	if err != nil {
		return "", 0, fmt.Errorf("--base-image %q: %w", o.BaseImage, err)
	}
	base, err := remote.Image(baseRef, remote.WithContext(ctx))
	if err != nil {
		return "", 0, fmt.Errorf("reading base image %s: %w", baseRef, err)
	}
	l, err := tarball.LayerFromFile(path)
	if err != nil {
		return "", 0, err
	}
	img, err := mutate.AppendLayers(base, l)
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
	size, err := l.Size()
	if err != nil {
		return "", 0, err
	}
	return target.Context().Digest(digest.String()).String(), size, nil
}

func nameOpts(o Options) []name.Option {
	if o.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}
