package envimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/internal/image/imagetest"
)

// testRecipe is small enough that the fake builder's package list can satisfy it.
var testRecipe = Recipe{Name: "env-test", Description: "a test environment", Suite: "bookworm", Architecture: "amd64",
	Packages: []string{"python3", "bash"}}

const testPackages = "bash\t5.2.15-2+b7\tamd64\ncoreutils\t9.1-1\tamd64\npython3\t3.11.2-1+b1\tamd64\n"

// fakeEntry is one entry of the tar the fake builder prints.
type fakeEntry struct {
	name string
	mode int64
	data string
	dir  bool
}

// rootEntries are what mmdebstrap's tar looks like in small: names start with "./".
func rootEntries(packages string) []fakeEntry {
	e := []fakeEntry{
		{name: "./", mode: 0o755, dir: true},
		{name: "./etc/", mode: 0o755, dir: true},
		{name: "./usr/bin/", mode: 0o755, dir: true},
		{name: "./usr/bin/python3", mode: 0o755, data: "#!python"},
		{name: "./usr/bin/su", mode: 0o4755, data: "su"},
		{name: "./usr/bin/chage", mode: 0o2755, data: "chage"},
	}
	if packages != "" {
		e = append(e, fakeEntry{name: "./etc/paddock/", mode: 0o755, dir: true},
			fakeEntry{name: "./etc/paddock/packages.txt", mode: 0o644, data: packages})
	}
	return e
}

func makeTar(t *testing.T, entries []fakeEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.data)), ModTime: time.Unix(1700000000, 0)}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// GNU tar pads the archive to whole 10 KiB records; the padding is part of the layer.
	buf.Write(make([]byte, 10240-buf.Len()%10240))
	return buf.Bytes()
}

// fakeBuilder is a stand-in for mmdebstrap: it logs its arguments and SOURCE_DATE_EPOCH, says
// something on stderr, waits for the file gate when there is one, and prints the tar (or fails
// with exit code 3 when the tar is nil).
type fakeBuilder struct {
	path, log, gate string
}

func newFakeBuilder(t *testing.T, tarball []byte, gated bool) *fakeBuilder {
	t.Helper()
	dir := t.TempDir()
	f := &fakeBuilder{path: filepath.Join(dir, "mmdebstrap"), log: filepath.Join(dir, "calls")}
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'mmdebstrap 0.0-fake'; exit 0; fi\n" +
		// One line per run: the hook's newlines become spaces.
		"echo \"SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH $*\" | tr '\\n' ' ' >> " + f.log + "\necho >> " + f.log + "\n" +
		"echo 'I: downloading packages with apt...' >&2\n"
	if gated {
		f.gate = filepath.Join(dir, "go")
		script += "while [ ! -e " + f.gate + " ]; do sleep 0.05; done\n"
	}
	if tarball == nil {
		script += "echo 'E: apt-get failed: no such package' >&2\nexit 3\n"
	} else {
		tarPath := filepath.Join(dir, "rootfs.tar")
		if err := os.WriteFile(tarPath, tarball, 0o644); err != nil {
			t.Fatal(err)
		}
		script += "cat " + tarPath + "\n"
	}
	if err := os.WriteFile(f.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// calls are the argument lines of every run but --version.
func (f *fakeBuilder) calls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(f.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestBuildRecordsTheLayerPackagesAndSetuidFiles(t *testing.T) {
	tarball := makeTar(t, rootEntries(testPackages))
	fake := newFakeBuilder(t, tarball, false)
	cache := t.TempDir()
	// Build stops its heartbeat before it returns: the buffer is read only afterwards.
	var out bytes.Buffer
	fs, built, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: cache, Command: fake.path, Progress: &out})
	if err != nil || !built {
		t.Fatalf("Build = %v, %v; want a build", built, err)
	}
	if diff := cmp.Diff(filepath.Join(cache, "env", "env-test-bookworm-amd64-"+testRecipe.Key()), fs.Dir); diff != "" {
		t.Errorf("cache dir (-want +got):\n%s", diff)
	}
	wantPkgs := []Package{{"bash", "5.2.15-2+b7", "amd64"}, {"coreutils", "9.1-1", "amd64"}, {"python3", "3.11.2-1+b1", "amd64"}}
	if diff := cmp.Diff(wantPkgs, fs.Packages); diff != "" {
		t.Errorf("packages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/usr/bin/su", "/usr/bin/chage"}, fs.Setuid); diff != "" {
		t.Errorf("setuid and setgid files (-want +got):\n%s", diff)
	}
	// The layer is the builder's tar, byte for byte, compressed; the digests are of both forms.
	gz, err := os.ReadFile(filepath.Join(fs.Dir, layerFile))
	if err != nil {
		t.Fatal(err)
	}
	want := image.LayerInfo{Digest: sha(gz), DiffID: sha(tarball), Size: int64(len(gz)), UnpackedSize: int64(len("#!python" + "su" + "chage" + testPackages))}
	if diff := cmp.Diff(want, fs.Layer); diff != "" {
		t.Errorf("layer record (-want +got):\n%s", diff)
	}
	if fs.PackagesSHA256 != sha(([]byte(testPackages))).Hex || fs.Tool != "mmdebstrap 0.0-fake" {
		t.Errorf("record: packages SHA-256 %s, tool %q; want %s, the fake's version", fs.PackagesSHA256, fs.Tool, sha([]byte(testPackages)).Hex)
	}
	calls := fake.calls(t)
	if len(calls) != 1 {
		t.Fatalf("the builder ran %d times, want once: %q", len(calls), calls)
	}
	for _, arg := range []string{"SOURCE_DATE_EPOCH=" + sourceDateEpoch + " ", " --include=bash,python3 ", " --format=tar ", " bookworm - http://deb.debian.org/debian "} {
		if !strings.Contains(calls[0], arg) {
			t.Errorf("the builder's arguments %q lack %q", calls[0], arg)
		}
	}
	for _, line := range []string{"    env-test: I: downloading packages with apt...", "    env-test: built in "} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("progress %q lacks %q", out.String(), line)
		}
	}
}

func TestBuildUsesTheCacheUntilTheKeyChanges(t *testing.T) {
	fake := newFakeBuilder(t, makeTar(t, rootEntries(testPackages)), false)
	cache := t.TempDir()
	opts := BuildOptions{CacheDir: cache, Command: fake.path}
	first, _, err := Build(context.Background(), testRecipe, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The same recipe, its packages in another order and other mirrors: the cache answers.
	same := testRecipe
	same.Packages = []string{"bash", "python3", "bash"}
	for _, o := range []BuildOptions{opts, {CacheDir: cache, Command: fake.path, Mirrors: []string{"http://mirror.invalid/debian"}}} {
		again, built, err := Build(context.Background(), same, o)
		if err != nil || built {
			t.Fatalf("Build of an unchanged recipe = built %v, %v; want the cached one", built, err)
		}
		if diff := cmp.Diff(first.Layer, again.Layer); diff != "" {
			t.Fatalf("cached layer (-first +again):\n%s", diff)
		}
	}
	// Another package, suite or architecture is another key, built into its own directory.
	more := testRecipe
	more.Packages = []string{"python3", "bash", "coreutils"}
	other, built, err := Build(context.Background(), more, opts)
	if err != nil || !built || other.Dir == first.Dir {
		t.Fatalf("Build with another package = built %v in %s, %v; want a new build beside %s", built, other.Dir, err, first.Dir)
	}
	if n := len(fake.calls(t)); n != 2 {
		t.Fatalf("the builder ran %d times, want 2", n)
	}
	// A damaged cache entry is built again rather than used.
	if err := os.WriteFile(filepath.Join(first.Dir, layerFile), []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, built, err := Build(context.Background(), testRecipe, opts); err != nil || !built {
		t.Fatalf("Build over a damaged layer = built %v, %v; want a new build", built, err)
	}
}

func TestKey(t *testing.T) {
	key := testRecipe.Key()
	changed := map[string]func(r *Recipe){
		"suite":        func(r *Recipe) { r.Suite = "trixie" },
		"architecture": func(r *Recipe) { r.Architecture = "arm64" },
		"packages":     func(r *Recipe) { r.Packages = []string{"python3"} },
		"customize":    func(r *Recipe) { r.Customize = "true\n" },
	}
	for what, change := range changed {
		r := testRecipe
		change(&r)
		if r.Key() == key {
			t.Errorf("another %s gives the same key %s", what, key)
		}
	}
	unchanged := testRecipe
	unchanged.Name, unchanged.Description = "renamed", "described otherwise"
	unchanged.Packages = []string{"bash", "python3"}
	if unchanged.Key() != key {
		t.Errorf("name, description or package order changed the key: %s, want %s", unchanged.Key(), key)
	}
}

func TestBuildFailuresLeaveNoCacheEntry(t *testing.T) {
	cases := map[string]struct {
		tarball []byte
		want    string
	}{
		"the builder fails":       {nil, "E: apt-get failed: no such package"},
		"no package list":         {makeTar(t, rootEntries("")), "has no " + PackagesFile},
		"a requested one missing": {makeTar(t, rootEntries("bash\t5.2\tamd64\n")), PackagesFile + " lists no python3"},
		"a malformed list":        {makeTar(t, rootEntries("bash 5.2\n")), `line 1 is "bash 5.2"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cache := t.TempDir()
			_, _, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: cache, Command: newFakeBuilder(t, tc.tarball, false).path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build error = %v, want one containing %q", err, tc.want)
			}
			left, _ := filepath.Glob(filepath.Join(cache, "env", "env-test-*"))
			if slices.ContainsFunc(left, func(p string) bool { return !strings.HasSuffix(p, ".lock") }) {
				t.Fatalf("a failed build left %v in the cache", left)
			}
		})
	}
}

func TestBuildWithoutMmdebstrapSaysHowToInstallIt(t *testing.T) {
	_, _, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: t.TempDir(), Command: "/nonexistent/mmdebstrap"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y mmdebstrap") {
		t.Fatalf("err = %v, want the install command", err)
	}
}

func TestBuildSaysItIsStillRunning(t *testing.T) {
	fake := newFakeBuilder(t, makeTar(t, rootEntries(testPackages)), true)
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: t.TempDir(), Command: fake.path, Progress: w, Heartbeat: 10 * time.Millisecond})
		w.Close()
		done <- err
	}()
	// The builder waits at its gate until the heartbeat has named the step it is in (or a minute
	// has passed, so that a missing heartbeat fails rather than hangs).
	open := func() { _ = os.WriteFile(fake.gate, nil, 0o644) }
	defer time.AfterFunc(time.Minute, open).Stop()
	lines := bufio.NewScanner(r)
	var seen []string
	heartbeat := func(line string) bool {
		return strings.Contains(line, "still running after") && strings.HasSuffix(line, "(downloading packages with apt...)")
	}
	for lines.Scan() && !heartbeat(lines.Text()) {
		seen = append(seen, lines.Text())
	}
	if !heartbeat(lines.Text()) {
		t.Fatalf("no heartbeat naming the builder's last step in %q", seen)
	}
	open()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestImageLayersConfigAndLabels(t *testing.T) {
	fs, _, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: t.TempDir(), Command: newFakeBuilder(t, makeTar(t, rootEntries(testPackages)), false).path})
	if err != nil {
		t.Fatal(err)
	}
	sandboxd := writeFile(t, "sandboxd v1")
	img, err := Image(fs, sandboxd)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers = %d, %v; want the root filesystem and sandboxd", len(layers), err)
	}
	if d, _ := layers[0].Digest(); d != fs.Layer.Digest {
		t.Errorf("bottom layer digest %s, want the cached layer's %s", d, fs.Layer.Digest)
	}
	if diff := cmp.Diff([]string{"./", "./etc/", "./usr/bin/", "./usr/bin/python3 #!python", "./usr/bin/su su", "./usr/bin/chage chage", "./etc/paddock/", "./etc/paddock/packages.txt " + strings.TrimSpace(testPackages)}, listing(t, layers[0])); diff != "" {
		t.Errorf("bottom layer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/sandboxd sandboxd v1"}, listing(t, layers[1])); diff != "" {
		t.Errorf("top layer (-want +got):\n%s", diff)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		LabelTitle: "env-test", LabelDescription: "a test environment", LabelSuite: "bookworm",
		LabelPackages: "bash=5.2.15-2+b7 python3=3.11.2-1+b1", LabelPackagesFile: "/etc/paddock/packages.txt",
		LabelPackagesCount: "3", LabelPackagesSHA256: sha([]byte(testPackages)).Hex,
		LabelSetuid: "/usr/bin/su /usr/bin/chage", LabelKey: testRecipe.Key(),
	}
	if diff := cmp.Diff(wantLabels, cfg.Config.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	got := []any{cfg.Config.Entrypoint, cfg.Config.User, cfg.Config.WorkingDir, cfg.Config.Env[0]}
	want := []any{[]string{"/usr/local/bin/sandboxd"}, "1000:1000", "/home/user", "PATH=/opt/venv/bin:/opt/npm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entrypoint, user, working dir, PATH (-want +got):\n%s", diff)
	}
}

// A new sandboxd changes only the top layer: pushing it again uploads that layer and the config,
// never the root filesystem.
func TestPushingANewSandboxdUploadsOnlyItsLayer(t *testing.T) {
	var uploads atomic.Int32
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/blobs/uploads/") {
			uploads.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	fs, _, err := Build(context.Background(), testRecipe, BuildOptions{CacheDir: t.TempDir(), Command: newFakeBuilder(t, makeTar(t, rootEntries(testPackages)), false).path})
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/paddock/env-test:dev"
	for i, want := range []int32{3, 2} {
		img, err := Image(fs, writeFile(t, fmt.Sprintf("sandboxd build %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		uploads.Store(0)
		if _, err := image.Push(context.Background(), img, ref); err != nil {
			t.Fatal(err)
		}
		if got := uploads.Load(); got != want {
			t.Errorf("push %d uploaded %d blobs, want %d", i, got, want)
		}
	}
}

func sha(b []byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sha256.Sum256(b))}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// listing names every entry of the layer, with the content of non-empty files.
func listing(t *testing.T, l v1.Layer) []string {
	t.Helper()
	var got []string
	for _, e := range imagetest.Entries(t, l) {
		got = append(got, strings.TrimSpace(e.Header.Name+" "+string(e.Data)))
	}
	return got
}

// code-interpreter is env-base plus Python's data stack: every env-base package, the same suite,
// architecture and customize hook, and a key of its own.
func TestCodeInterpreterExtendsBase(t *testing.T) {
	ci := CodeInterpreter
	if err := ci.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range Base.Packages {
		if !slices.Contains(ci.Packages, p) {
			t.Errorf("code-interpreter lacks env-base's %s", p)
		}
	}
	for _, p := range []string{"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy", "python3-seaborn", "python3-requests"} {
		if !slices.Contains(ci.Packages, p) {
			t.Errorf("code-interpreter lacks %s", p)
		}
	}
	if ci.Suite != Base.Suite || ci.Architecture != Base.Architecture || ci.Key() == Base.Key() || ci.Name == Base.Name {
		t.Errorf("code-interpreter %s/%s key %s; want env-base's suite and architecture (%s/%s) and another name and key than %s",
			ci.Suite, ci.Architecture, ci.Key(), Base.Suite, Base.Architecture, Base.Key())
	}
	if Base.Customize != "" || !strings.Contains(ci.hook(), customizeHook) || !strings.Contains(ci.Customize, sandboxd.MatplotlibFontCacheDir) {
		t.Errorf("code-interpreter's hook must be env-base's (%q) and build matplotlib's font cache into %s: %q", Base.Customize, sandboxd.MatplotlibFontCacheDir, ci.Customize)
	}
	if len(Base.Packages) == len(ci.Packages) || Base.Name != "env-base" {
		t.Errorf("extending env-base changed it: %s with %d packages", Base.Name, len(Base.Packages))
	}
}
