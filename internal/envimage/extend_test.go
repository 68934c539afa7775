package envimage

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const extendedPackages = testPackages + "python3-numpy\t1:1.24.2-1\tamd64\n"

// extendedEntries are the root filesystem of testRecipe with python3-numpy installed over it: a
// changed package list, new files and directories, a new hard link to an unchanged file and one
// to a changed file, a new setuid file, a removed file and a removed directory with its contents.
func extendedEntries() (base, extended []fakeEntry) {
	base = append(rootEntries(testPackages),
		fakeEntry{name: "./usr/bin/python3.11", mode: 0o755, data: "#!python 3.11"},
		fakeEntry{name: "./usr/bin/py3", link: "./usr/bin/python3.11"},
		fakeEntry{name: "./var/", mode: 0o755, dir: true},
		fakeEntry{name: "./var/cache/", mode: 0o755, dir: true},
		fakeEntry{name: "./var/cache/old/", mode: 0o755, dir: true},
		fakeEntry{name: "./var/cache/old/a", mode: 0o644, data: "a"})
	extended = []fakeEntry{
		{name: "./", mode: 0o755, dir: true},
		{name: "./etc/", mode: 0o755, dir: true},
		{name: "./usr/bin/", mode: 0o755, dir: true},
		{name: "./usr/bin/python3", mode: 0o755, data: "#!python"},
		{name: "./usr/bin/su", mode: 0o4755, data: "su"},
		{name: "./usr/bin/python3.11", mode: 0o755, data: "#!python 3.11.2"},
		{name: "./usr/bin/py3", link: "./usr/bin/python3.11"},
		{name: "./usr/bin/python", link: "./usr/bin/python3"},
		{name: "./usr/bin/newgrp", mode: 0o4755, data: "newgrp"},
		{name: "./etc/paddock/", mode: 0o755, dir: true},
		{name: "./etc/paddock/packages.txt", mode: 0o644, data: extendedPackages},
		{name: "./usr/lib/", mode: 0o755, dir: true},
		{name: "./usr/lib/numpy/", mode: 0o755, dir: true},
		{name: "./usr/lib/numpy/core.so", mode: 0o644, data: "ELF"},
		{name: "./var/", mode: 0o755, dir: true},
		{name: "./var/cache/", mode: 0o755, dir: true},
	}
	return base, extended
}

// An extended recipe installs its packages over its base's root filesystem, and its layer holds
// only what that changed, on top of the base's layer.
func TestExtendedRecipeBuildsOnlyTheDifference(t *testing.T) {
	baseEntries, extEntries := extendedEntries()
	fake := newFakeExtendingBuilder(t, makeTar(t, baseEntries), makeTar(t, extEntries), false)
	ext := testRecipe.Extend("env-test-numpy", "a test environment with numpy", "python3-numpy")
	cache := t.TempDir()
	fs, built, err := Build(context.Background(), ext, BuildOptions{CacheDir: cache, Command: fake.path})
	if err != nil || !built {
		t.Fatalf("Build = %v, %v; want a build", built, err)
	}
	if fs.Base == nil || fs.Base.Recipe.Name != "env-test" || fs.BaseDiffID != fs.Base.Layer.DiffID.String() {
		t.Fatalf("extended root filesystem's base = %+v (recorded %s); want env-test's, built first", fs.Base, fs.BaseDiffID)
	}
	calls := fake.calls(t)
	if len(calls) != 2 {
		t.Fatalf("the builder ran %d times, want twice (the base, then the extension): %q", len(calls), calls)
	}
	baseLayer := filepath.Join(fs.Base.Dir, layerFile)
	for _, arg := range []string{" --variant=custom ", ` --setup-hook=tar -C "$1" '--exclude=./dev/*' -xzf '` + baseLayer + `' `,
		`customize.sh' "$1" python3-numpy `, " bookworm - http://deb.debian.org/debian "} {
		if !strings.Contains(calls[1], arg) {
			t.Errorf("the extension's builder arguments %q lack %q", calls[1], arg)
		}
	}
	if strings.Contains(calls[1], "--include=") {
		t.Errorf("the extension's builder arguments %q install packages with mmdebstrap; want them only in the hook", calls[1])
	}
	// Packages and setuid files are the whole image's.
	if len(fs.Packages) != 4 || fs.Packages[3].Name != "python3-numpy" {
		t.Errorf("packages = %v, want env-test's and python3-numpy", fs.Packages)
	}
	if diff := cmp.Diff([]string{"/usr/bin/su", "/usr/bin/newgrp"}, fs.Setuid); diff != "" {
		t.Errorf("setuid files (-want +got):\n%s", diff)
	}

	img, err := Image(fs, writeFile(t, "sandboxd v1"))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 3 {
		t.Fatalf("layers = %d, %v; want the base's, the extension's and sandboxd's", len(layers), err)
	}
	if d, _ := layers[0].Digest(); d != fs.Base.Layer.Digest {
		t.Errorf("bottom layer %s, want the base's %s", d, fs.Base.Layer.Digest)
	}
	if d, _ := layers[1].Digest(); d != fs.Layer.Digest {
		t.Errorf("middle layer %s, want the extension's %s", d, fs.Layer.Digest)
	}
	want := []string{
		"./usr/bin/python3.11 #!python 3.11.2",
		// py3 is unchanged, but its target is replaced; python is new, its target unchanged.
		"./usr/bin/py3", "./usr/bin/python", "./usr/bin/newgrp newgrp",
		"./etc/paddock/packages.txt " + strings.TrimSpace(extendedPackages),
		"./usr/lib/", "./usr/lib/numpy/", "./usr/lib/numpy/core.so ELF",
		// Whiteouts in path order; the removed directory's contents go with it.
		"./usr/bin/.wh.chage", "./var/cache/.wh.old",
	}
	if diff := cmp.Diff(want, listing(t, layers[1])); diff != "" {
		t.Errorf("the extension's layer (-want +got):\n%s", diff)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Labels[LabelPackages]; got != "bash=5.2.15-2+b7 python3=3.11.2-1+b1 python3-numpy=1:1.24.2-1" {
		t.Errorf("label %s = %q, want every requested package, the base's too", LabelPackages, got)
	}
	if got := cfg.Config.Labels[LabelFrom]; got != "env-test "+testRecipe.Key() {
		t.Errorf("label %s = %q, want the base's name and key", LabelFrom, got)
	}

	// Cached: neither is built again.
	if again, built, err := Build(context.Background(), ext, BuildOptions{CacheDir: cache, Command: fake.path}); err != nil || built || again.Layer != fs.Layer {
		t.Fatalf("Build of the cached extension = built %v, %v; want the cached one", built, err)
	}
	if n := len(fake.calls(t)); n != 2 {
		t.Fatalf("the builder ran %d times, want still 2", n)
	}
	// Built over another base layer (the base was built again), the extension is built again.
	record := filepath.Join(fs.Dir, recordFile)
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	r["baseDiffID"] = "sha256:0000"
	if data, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, built, err := Build(context.Background(), ext, BuildOptions{CacheDir: cache, Command: fake.path}); err != nil || !built {
		t.Fatalf("Build over a changed base = built %v, %v; want a new build", built, err)
	}
	if n := len(fake.calls(t)); n != 3 {
		t.Fatalf("the builder ran %d times, want 3: the extension again, not the base", n)
	}
}

func TestExtendedKeyFollowsItsBase(t *testing.T) {
	ext := testRecipe.Extend("env-test-numpy", "", "python3-numpy")
	other := testRecipe
	other.Suite = "trixie"
	otherExt := other.Extend("env-test-numpy", "", "python3-numpy")
	more := testRecipe.Extend("env-test-numpy", "", "python3-numpy", "python3-scipy")
	if ext.Key() == otherExt.Key() || ext.Key() == more.Key() || ext.Key() == testRecipe.Key() {
		t.Errorf("keys %s (extended), %s (over another base), %s (more packages), %s (the base): want all different",
			ext.Key(), otherExt.Key(), more.Key(), testRecipe.Key())
	}
}

func TestExtendValidation(t *testing.T) {
	nothing := testRecipe.Extend("env-test-same", "", "bash")
	if err := nothing.Validate(); err == nil || !strings.Contains(err.Error(), "no package of its own") {
		t.Errorf("an extension with no new package: %v, want an error saying so", err)
	}
	moved := testRecipe.Extend("env-test-arm", "", "python3-numpy")
	moved.Architecture = "arm64"
	if err := moved.Validate(); err == nil || !strings.Contains(err.Error(), "must be env-test's (bookworm/amd64)") {
		t.Errorf("an extension on another architecture: %v, want an error naming the base's", err)
	}
}

// An extension's hook runs its own step, not its base's again: the base's ran in the root
// filesystem the extension starts from.
func TestExtensionRunsOnlyItsOwnStep(t *testing.T) {
	base := testRecipe.Then("echo base-step\n")
	ext := base.Extend("env-test-numpy", "", "python3-numpy").Then("echo extension-step\n")
	if h := base.hook(); !strings.HasPrefix(h, customizeHook) || !strings.HasSuffix(h, "echo base-step\n") {
		t.Errorf("the base's hook %q: want the common hook, then its step", h)
	}
	if h := ext.hook(); !strings.HasPrefix(h, extendHook) || !strings.HasSuffix(h, "echo extension-step\n") || strings.Contains(h, "base-step") {
		t.Errorf("the extension's hook %q: want the install over the base, then its own step alone", h)
	}
	if ext.Key() == base.Extend("env-test-numpy", "", "python3-numpy").Key() {
		t.Error("the extension's own step does not change its key")
	}
}
