package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/internal/image/imagetest"
)

func TestBusyboxTreeSkipsTheBinaryName(t *testing.T) {
	tree := busyboxTree("/bin/busybox", []string{"bin/sh", "bin/busybox", "usr/bin/wget"})
	want := []string{"bin/busybox", "bin/sh", "usr/bin/wget"}
	if diff := cmp.Diff(want, tree.Paths()); diff != "" {
		t.Fatalf("paths (-want +got):\n%s", diff)
	}
	if got := tree.entries["bin/busybox"]; got.link != "" || got.source != "/bin/busybox" {
		t.Fatalf("bin/busybox = %+v, want the regular file copied from /bin/busybox", got)
	}
	if got := tree.entries["usr/bin/wget"].link; got != "/bin/busybox" {
		t.Fatalf("usr/bin/wget links to %q, want /bin/busybox", got)
	}
}

func TestFromBinaryLayoutAndConfig(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := FromBinary(bin, "/usr/local/bin/app")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.OS, cfg.Architecture, strings.Join(cfg.Config.Entrypoint, " ")}
	if diff := cmp.Diff([]string{"linux", "amd64", "/usr/local/bin/app"}, got); diff != "" {
		t.Fatalf("platform and entrypoint (-want +got):\n%s", diff)
	}
	wantFiles := []string{"usr/ dir 755", "usr/local/ dir 755", "usr/local/bin/ dir 755", "usr/local/bin/app file 755 #!binary"}
	if diff := cmp.Diff(wantFiles, layerListing(t, img)); diff != "" {
		t.Fatalf("layer (-want +got):\n%s", diff)
	}
}

func TestFromBinaryMissingFileNamesIt(t *testing.T) {
	_, err := FromBinary("/nonexistent/app", "/app")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/app") {
		t.Fatalf("err = %v, want one naming /nonexistent/app", err)
	}
}

func TestSameInputSameDigest(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(bin, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := FromBinary(bin, "/app")
	b, _ := FromBinary(bin, "/app")
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("digests differ for the same input: %s and %s", da, db)
	}
}

func TestPushToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	bin := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(bin, []byte("payload"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := FromBinary(bin, "/app")
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/tools/app:dev"
	first, err := Push(context.Background(), img, ref)
	if err != nil || !first.Uploaded {
		t.Fatalf("first push = %+v, %v; want an upload", first, err)
	}
	// A second push of the same image uploads nothing and pins the same digest.
	again, err := Push(context.Background(), img, ref)
	if err != nil || again != (Pushed{Ref: first.Ref}) {
		t.Fatalf("second push = %+v, %v; want %+v, nil", again, err, Pushed{Ref: first.Ref})
	}
	pinnedRef, err := name.ParseReference(first.Ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(pinnedRef)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(layerListing(t, img), layerListing(t, pulled)); diff != "" {
		t.Fatalf("pulled layer differs (-pushed +pulled):\n%s", diff)
	}
}

func TestPushBadReference(t *testing.T) {
	img, err := FromTree(NewTree(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Push(context.Background(), img, "Not A Ref")
	if err == nil || !strings.Contains(err.Error(), "HOST:PORT/NAME:TAG") {
		t.Fatalf("err = %v, want one showing the expected form", err)
	}
}

func TestTreeDataDirsAndOwners(t *testing.T) {
	tree := NewTree().
		AddData("/etc/passwd", []byte("user:x:1000"), 0o644).
		AddDir("/workspace", 0o755, 1000, 1000).
		AddDir("/workspace/sub", 0o1777, 0, 0).
		AddSymlink("/home/user", "/workspace")
	img, err := FromTree(tree, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etc/ dir 755", "etc/passwd file 644 user:x:1000", "home/ dir 755", "home/user -> /workspace",
		"workspace/ dir 755 1000:1000", "workspace/sub/ dir 1777"}
	if diff := cmp.Diff(want, layerListing(t, img)); diff != "" {
		t.Fatalf("layer (-want +got):\n%s", diff)
	}
}

func layerListing(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want exactly one", len(layers), err)
	}
	var got []string
	for _, e := range imagetest.Entries(t, layers[0]) {
		h, line := e.Header, e.Header.Name
		switch h.Typeflag {
		case tar.TypeDir:
			line += " dir " + modeString(h.Mode)
			if h.Uid != 0 || h.Gid != 0 {
				line += " " + strconv.Itoa(h.Uid) + ":" + strconv.Itoa(h.Gid)
			}
		case tar.TypeSymlink:
			line += " -> " + h.Linkname
		default:
			line += " file " + modeString(h.Mode) + " " + string(e.Data)
		}
		got = append(got, line)
	}
	return got
}

func modeString(m int64) string { return strconv.FormatInt(m, 8) }

func TestCompressTarIsReproducibleAndReusable(t *testing.T) {
	tarball := NewTree().AddData("/etc/os-release", []byte("ID=debian\n"), 0o644).AddDir("/home/user", 0o755, 1000, 1000)
	data, err := tarball.tar()
	if err != nil {
		t.Fatal(err)
	}
	var first, second bytes.Buffer
	var seen []string
	info, err := CompressTar(&first, bytes.NewReader(data), func(h *tar.Header, _ io.Reader) error {
		seen = append(seen, h.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CompressTar(&second, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatal("the same tar compressed twice gives different layers")
	}
	if diff := cmp.Diff([]string{"etc/", "etc/os-release", "home/", "home/user/"}, seen); diff != "" {
		t.Errorf("inspected entries (-want +got):\n%s", diff)
	}
	path := filepath.Join(t.TempDir(), "layer.tar.gz")
	if err := os.WriteFile(path, first.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	layer, err := CompressedFileLayer(path, info)
	if err != nil {
		t.Fatal(err)
	}
	img, err := FromLayers(Config{Labels: map[string]string{"a": "b"}, WorkingDir: "/home/user"}, layer)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etc/ dir 755", "etc/os-release file 644 ID=debian\n", "home/ dir 755", "home/user/ dir 755 1000:1000"}
	if diff := cmp.Diff(want, layerListing(t, img)); diff != "" {
		t.Errorf("layer read back from the file (-want +got):\n%s", diff)
	}
	if d, _ := layer.DiffID(); d.Hex != fmt.Sprintf("%x", sha256.Sum256(data)) || info.UnpackedSize != int64(len("ID=debian\n")) {
		t.Errorf("diffID %s and unpacked size %d; want the tar's SHA-256 and %d", d, info.UnpackedSize, len("ID=debian\n"))
	}
	cfg, err := img.ConfigFile()
	if err != nil || cfg.Config.Labels["a"] != "b" || cfg.Config.WorkingDir != "/home/user" {
		t.Errorf("config = %+v, %v; want the label and working dir given", cfg, err)
	}
	info.Size++
	if _, err := CompressedFileLayer(path, info); err == nil || !strings.Contains(err.Error(), "remove it to rebuild") {
		t.Errorf("a layer of another size than its record: err = %v, want one saying to rebuild", err)
	}
}
