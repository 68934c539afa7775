package devcluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/paddock-dev/paddock/internal/envimage"
	"github.com/paddock-dev/paddock/internal/image"
)

// EnvImage is the environment image of recipe name (envimage.Recipes) in the dev registry.
func (c Config) EnvImage(name string) string { return c.RegistryHost() + "/paddock/" + name + ":dev" }

// EnvBaseImage is env-base in the dev registry: the E2B `base` pool and
// examples/sandboxd-template.yaml run it.
func (c Config) EnvBaseImage() string { return c.EnvImage(envimage.Base.Name) }

// CodeInterpreterImage is the code-interpreter image in the dev registry: the E2B
// `code-interpreter-v1` pool runs it.
func (c Config) CodeInterpreterImage() string { return c.EnvImage(envimage.CodeInterpreter.Name) }

// envBuild is the build of every environment image's root filesystem, which runs beside the
// cluster's start: a first build takes minutes each, mostly downloading and unpacking Debian
// packages. The recipes build one after the other (two mmdebstraps would only share 2 cores).
type envBuild struct {
	done   chan struct{}
	cancel context.CancelFunc
	// fs and built hold each recipe's root filesystem and whether it was built, in
	// envimage.Recipes' order.
	fs    []*envimage.RootFS
	built []bool
	err   error
}

// startEnvBuild starts building the root filesystems the cache does not hold yet: a recipe that
// extends another (code-interpreter over env-base) installs only its own packages over the
// other's, after it.
func (cl *cluster) startEnvBuild(ctx context.Context) (string, bool, error) {
	recipes := envimage.Recipes
	b := &envBuild{done: make(chan struct{}), cancel: func() {}, fs: make([]*envimage.RootFS, len(recipes)), built: make([]bool, len(recipes))}
	cl.env = b
	var missing []string
	for i, r := range recipes {
		if fs, err := envimage.Load(r, cl.envCacheDir(r)); err == nil {
			b.fs[i] = fs
		} else {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) == 0 {
		close(b.done)
		return "cached in " + envimage.DefaultCacheDir(), false, nil
	}
	ctx, b.cancel = context.WithCancel(ctx)
	go func() {
		defer close(b.done)
		for i, r := range recipes {
			if b.fs[i] != nil {
				continue
			}
			if b.fs[i], b.built[i], b.err = envimage.Build(ctx, r, envimage.BuildOptions{Progress: cl.out}); b.err != nil {
				return
			}
		}
	}()
	return "building " + strings.Join(missing, ", ") + " in the background (progress below)", true, nil
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

// pushEnvImages waits for the root filesystems, puts the sandboxd built for the paddock step on
// top of each and pushes them. Only the sandboxd layers change from one source tree to the next.
func (cl *cluster) pushEnvImages(ctx context.Context) (string, bool, error) {
	if cl.env == nil {
		return "", false, fmt.Errorf("the environment image builds were never started")
	}
	select {
	case <-cl.env.done:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	if cl.env.err != nil {
		return "", false, cl.env.err
	}
	var details []string
	changed := false
	for i, fs := range cl.env.fs {
		ref := cl.cfg.EnvImage(fs.Recipe.Name)
		img, err := envimage.Image(fs, cl.cfg.path("bin", "sandboxd"))
		if err != nil {
			return "", false, err
		}
		p, err := image.Push(ctx, img, ref)
		if err != nil {
			return "", false, fmt.Errorf("push %s: %w", ref, err)
		}
		how := "cached"
		if cl.env.built[i] {
			how = fmt.Sprintf("built in %.0fs", fs.BuildSeconds)
		}
		layer := "Debian layer"
		if fs.Base != nil {
			layer = "layer over " + fs.Base.Recipe.Name
		}
		details = append(details, fmt.Sprintf("%s (%s; %d packages, %s %d MiB compressed, %d MiB unpacked)", ref, how,
			len(fs.Packages), layer, fs.Layer.Size>>20, fs.Layer.UnpackedSize>>20))
		changed = changed || p.Uploaded || cl.env.built[i]
	}
	return strings.Join(details, ", ") + "; package lists in " + envimage.PackagesFile, changed, nil
}
