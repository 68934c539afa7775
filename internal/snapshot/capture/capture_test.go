package capture

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// fakeRuntime injects containerd's answers and errors, and records what was asked. It is the
// only stand-in here: a real containerd needs the node (the local cluster's e2e).
type fakeRuntime struct {
	mu        sync.Mutex
	runtime   string
	upper     string
	pauseErr  error
	resumeErr error
	stateErr  error
	calls     []string
	paused    bool
	spec      string
}

func (f *fakeRuntime) Spec(context.Context, string) ([]byte, error) {
	return []byte(f.spec), nil
}

func (f *fakeRuntime) Paused(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused, f.stateErr
}

func (f *fakeRuntime) Container(context.Context, string) (string, string, error) {
	return f.runtime, "overlayfs", nil
}

func (f *fakeRuntime) Mounts(context.Context, string, string) ([]Mount, error) {
	return []Mount{{Type: "overlay", Source: "overlay", Options: []string{"index=off", "workdir=/w", "upperdir=" + f.upper, "lowerdir=/l"}}}, nil
}

func (f *fakeRuntime) Pause(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "pause "+id)
	if f.pauseErr != nil {
		return f.pauseErr
	}
	f.paused = true
	return nil
}

func (f *fakeRuntime) Resume(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "resume "+id)
	if f.resumeErr != nil {
		return f.resumeErr
	}
	f.paused = false
	return nil
}

// registryHost serves an OCI registry on loopback for the test and pushes a one-file base image.
func registryHost(t *testing.T) (host, base string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "etc/base", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4})
	_, _ = tw.Write([]byte("base"))
	_ = tw.Close()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(host+"/base:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing the base image: %v", err)
	}
	return host, ref.String()
}

func options(t *testing.T, host, base string) Options {
	return Options{ContainerID: "c1", BaseImage: base, Target: host + "/ns/snap:uid", Insecure: true, WorkDir: t.TempDir(),
		Layer: layer.Options{Limits: layer.DefaultLimits()}}
}

// TestRunPushesBasePlusLayer: the pushed image is the base image plus one layer holding the
// upper directory, the container was paused once and resumed once.
func TestRunPushesBasePlusLayer(t *testing.T) {
	host, base := registryHost(t)
	upper := t.TempDir()
	if err := os.WriteFile(filepath.Join(upper, "new"), []byte("written in the sandbox"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{runtime: "io.containerd.runc.v2", upper: upper}
	res := Run(context.Background(), rt, options(t, host, base))
	if res.Error != "" {
		t.Fatalf("Run: %s", res.Error)
	}
	if d := cmp.Diff([]string{"pause c1", "resume c1"}, rt.calls); d != "" {
		t.Errorf("runtime calls (-want +got):\n%s", d)
	}
	ref, err := name.NewDigest(res.Image, name.Insecure)
	if err != nil {
		t.Fatalf("result image %q is not a digest reference: %v", res.Image, err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("pushed image has %d layers (error %v), want the base's 1 plus 1", len(layers), err)
	}
	rc, err := layers[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Name != "new" {
		t.Fatalf("first entry %v (error %v), want the file new", h, err)
	}
	if b, _ := io.ReadAll(tr); string(b) != "written in the sandbox" {
		t.Errorf("content %q", b)
	}
	if res.SizeBytes <= 0 {
		t.Errorf("size %d, want the stored layer's size", res.SizeBytes)
	}
}

// TestRunResumesOnFailure: whatever fails after the pause, the container is resumed and the
// result names the failure; no image is reported.
func TestRunResumesOnFailure(t *testing.T) {
	host, base := registryHost(t)
	for name, tc := range map[string]struct {
		prepare func(t *testing.T, upper string, o *Options)
		want    string
	}{
		"hostile file": {prepare: func(t *testing.T, upper string, _ *Options) {
			if err := os.WriteFile(filepath.Join(upper, ".wh.x"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, want: `names starting with ".wh."`},
		"over the budget": {prepare: func(t *testing.T, upper string, o *Options) {
			if err := os.WriteFile(filepath.Join(upper, "big"), make([]byte, 2048), 0o644); err != nil {
				t.Fatal(err)
			}
			o.Layer.MaxBytes = 1024
		}, want: "past its limit"},
		"registry down": {prepare: func(_ *testing.T, _ string, o *Options) {
			o.Target = "127.0.0.1:1/ns/snap:uid"
		}, want: "pushing 127.0.0.1:1/ns/snap:uid"},
		"work dir gone": {prepare: func(_ *testing.T, _ string, o *Options) {
			o.WorkDir = filepath.Join(o.WorkDir, "missing")
		}, want: "missing"},
	} {
		t.Run(name, func(t *testing.T) {
			upper := t.TempDir()
			o := options(t, host, base)
			tc.prepare(t, upper, &o)
			rt := &fakeRuntime{runtime: "io.containerd.runc.v2", upper: upper}
			res := Run(context.Background(), rt, o)
			if !strings.Contains(res.Error, tc.want) || res.Image != "" {
				t.Fatalf("result %+v, want an error containing %q and no image", res, tc.want)
			}
			if rt.paused {
				t.Errorf("the container is left paused; calls %v", rt.calls)
			}
		})
	}
}

// TestWhilePausedResumesWhenStopped: a capture whose context ends (SIGTERM) resumes the
// container at once, while the copy still runs, and fails.
func TestWhilePausedResumesWhenStopped(t *testing.T) {
	rt := &fakeRuntime{}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := whilePaused(ctx, rt, "c1", func() error {
		cancel()
		// The resume runs on its own goroutine; wait for it as the copy of a large tree would.
		for {
			rt.mu.Lock()
			done := !rt.paused
			rt.mu.Unlock()
			if done {
				return nil
			}
		}
	})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the capture stopped by its context", err)
	}
	if d := cmp.Diff([]string{"pause c1", "resume c1"}, rt.calls); d != "" {
		t.Errorf("runtime calls (-want +got):\n%s", d)
	}
}

// TestWhilePausedReportsResumeFailure: a resume containerd refuses is an error, never hidden.
func TestWhilePausedReportsResumeFailure(t *testing.T) {
	rt := &fakeRuntime{resumeErr: errors.New("shim gone")}
	_, err := whilePaused(context.Background(), rt, "c1", func() error { return nil })
	if err == nil || !strings.Contains(err.Error(), "resuming container c1: shim gone") {
		t.Fatalf("error %v, want the resume failure", err)
	}
}

// TestRunRefuses: gVisor containers without a runsc binary and root filesystems that are not
// one overlay are refused before any pause.
func TestRunRefuses(t *testing.T) {
	rt := &fakeRuntime{runtime: "io.containerd.runsc.v1"}
	res := Run(context.Background(), rt, Options{ContainerID: "c1", Target: "127.0.0.1:1/x:y", WorkDir: t.TempDir()})
	if !strings.Contains(res.Error, "--snapshot-runsc") || len(rt.calls) != 0 {
		t.Errorf("result %+v calls %v: want gVisor without runsc refused before any pause", res, rt.calls)
	}
	for _, mounts := range [][]Mount{
		nil,
		{{Type: "bind", Source: "/x"}},
		{{Type: "overlay", Options: []string{"lowerdir=/a:/b"}}},
		{{Type: "overlay", Options: []string{"upperdir=relative"}}},
	} {
		if dir, err := UpperDir(mounts); err == nil {
			t.Errorf("UpperDir(%+v) = %q, want an error", mounts, dir)
		}
	}
}

// layerEntries lists the names (and contents of regular files) of one layer of an image.
func layerEntries(t *testing.T, ref string, i int) map[string]string {
	t.Helper()
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) <= i {
		t.Fatalf("image has %d layers (error %v), want more than %d", len(layers), err, i)
	}
	rc, err := layers[i].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// TestRunCapturesVolumes: the volumes named by mount path are found in the container's OCI spec,
// read from the node's root in the same pause as the root filesystem, and pushed as a third
// layer holding the restore binary and each volume under .paddock/volumes/<name>/.
func TestRunCapturesVolumes(t *testing.T) {
	host, base := registryHost(t)
	upper, vol, bin := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "restore")
	for p, content := range map[string]string{filepath.Join(upper, "rootfs-file"): "r", filepath.Join(vol, "dir/volume-file"): "v", bin: "binary"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rt := &fakeRuntime{runtime: "io.containerd.runc.v2", upper: upper,
		spec: `{"mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/home/user/data","type":"bind","source":"` + vol + `","options":["rbind","rw"]}]}`}
	o := options(t, host, base)
	o.Volumes, o.HostRoot, o.RestoreBinary = []snapshot.Volume{{Name: "data", MountPath: "/home/user/data"}}, "/", bin
	res := Run(context.Background(), rt, o)
	if res.Error != "" {
		t.Fatalf("Run: %s", res.Error)
	}
	if d := cmp.Diff([]string{"pause c1", "resume c1"}, rt.calls); d != "" {
		t.Errorf("runtime calls (-want +got):\n%s", d)
	}
	if snapshot.RestoreBinaryPath != "/"+layer.ReservedDir+"/"+snapshot.RestoreBinaryName {
		t.Errorf("the restore init container runs %s, the layer holds /%s/%s", snapshot.RestoreBinaryPath, layer.ReservedDir, snapshot.RestoreBinaryName)
	}
	if got := layerEntries(t, res.Image, 1); got["rootfs-file"] != "r" || len(got) != 1 {
		t.Errorf("root filesystem layer %v, want rootfs-file only", got)
	}
	want := map[string]string{".paddock/": "", ".paddock/.wh..wh..opq": "", ".paddock/volumes/": "", ".paddock/paddock-snapshot": "binary",
		".paddock/volumes/data/": "", ".paddock/volumes/data/dir/": "", ".paddock/volumes/data/dir/volume-file": "v"}
	if d := cmp.Diff(want, layerEntries(t, res.Image, 2)); d != "" {
		t.Errorf("volume layer (-want +got):\n%s", d)
	}
}

// TestRunRefusesVolumes: a volume the container does not mount, one that is not a bind mount,
// or whose host path ends in a symlink fails the capture before any pause.
func TestRunRefusesVolumes(t *testing.T) {
	host, base := registryHost(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ spec, want string }{
		"not mounted":  {spec: `{"mounts":[]}`, want: "volume data: the container has no mount at /data"},
		"not a bind":   {spec: `{"mounts":[{"destination":"/data","type":"tmpfs","source":"tmpfs"}]}`, want: "is not a bind mount"},
		"symlink":      {spec: `{"mounts":[{"destination":"/data","type":"bind","source":"` + link + `"}]}`, want: "volume data: opening " + link},
		"spec garbage": {spec: `{`, want: "reading the container's OCI spec"},
	} {
		t.Run(name, func(t *testing.T) {
			rt := &fakeRuntime{runtime: "io.containerd.runc.v2", upper: t.TempDir(), spec: tc.spec}
			o := options(t, host, base)
			o.Volumes, o.HostRoot = []snapshot.Volume{{Name: "data", MountPath: "/data"}}, "/"
			res := Run(context.Background(), rt, o)
			if !strings.Contains(res.Error, tc.want) || len(rt.calls) != 0 {
				t.Errorf("result %+v calls %v, want %q before any pause", res, rt.calls, tc.want)
			}
		})
	}
}
