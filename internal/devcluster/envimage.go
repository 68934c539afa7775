package devcluster

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/internal/envimage"
	"github.com/paddock-dev/paddock/internal/image"
)

// EnvBaseImage is env-base in the dev registry: the E2B `base` pool and
// examples/sandboxd-template.yaml run it.
func (c Config) EnvBaseImage() string { return c.RegistryHost() + "/paddock/env-base:dev" }

// envBuild is the env-base root filesystem build, which runs beside the cluster's start: a
// first build takes minutes, mostly downloading and unpacking Debian packages.
type envBuild struct {
	done   chan struct{}
	cancel context.CancelFunc
	fs     *envimage.RootFS
	built  bool
	err    error
}

// startEnvBuild starts the env-base root filesystem build, or finds it in the cache.
func (cl *cluster) startEnvBuild(ctx context.Context) (string, bool, error) {
	r := envimage.Base
	if fs, err := envimage.Load(r, cl.envCacheDir(r)); err == nil {
		b := &envBuild{done: make(chan struct{}), cancel: func() {}, fs: fs}
		close(b.done)
		cl.env = b
		return "cached in " + fs.Dir, false, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &envBuild{done: make(chan struct{}), cancel: cancel}
	cl.env = b
	go func() {
		defer close(b.done)
		b.fs, b.built, b.err = envimage.Build(ctx, r, envimage.BuildOptions{Progress: cl.out})
	}()
	return "building in the background (progress below)", true, nil
}

func (cl *cluster) envCacheDir(r envimage.Recipe) string {
	return envimage.CacheDirOf(r, envimage.DefaultCacheDir())
}

// stopEnvBuild cancels an unfinished build and waits for mmdebstrap to clean up after itself.
func (cl *cluster) stopEnvBuild() {
	if cl.env != nil {
		cl.env.cancel()
		<-cl.env.done
	}
}

// pushEnvImages waits for the root filesystem, puts the sandboxd built for the paddock step on
// top and pushes env-base. Only the sandboxd layer changes from one source tree to the next.
func (cl *cluster) pushEnvImages(ctx context.Context) (string, bool, error) {
	if cl.env == nil {
		return "", false, fmt.Errorf("the env-base build was never started")
	}
	select {
	case <-cl.env.done:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	if cl.env.err != nil {
		return "", false, cl.env.err
	}
	fs := cl.env.fs
	img, err := envimage.Image(fs, cl.cfg.path("bin", "sandboxd"))
	if err != nil {
		return "", false, err
	}
	p, err := image.Push(ctx, img, cl.cfg.EnvBaseImage())
	if err != nil {
		return "", false, fmt.Errorf("push %s: %w", cl.cfg.EnvBaseImage(), err)
	}
	how := "cached"
	if cl.env.built {
		how = fmt.Sprintf("built in %.0fs", fs.BuildSeconds)
	}
	return fmt.Sprintf("%s (%s; %d packages, %d MiB compressed, %d MiB unpacked; list in %s)", cl.cfg.EnvBaseImage(), how,
		len(fs.Packages), fs.Layer.Size>>20, fs.Layer.UnpackedSize>>20, envimage.PackagesFile), p.Uploaded || cl.env.built, nil
}
