package interpreter

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fontCacheBuilt is what matplotlib logs (at level INFO) once it has built a font cache.
const fontCacheBuilt = "generated new fontManager"

// TestMatplotlibFontCache: with a prebuilt font cache in Config.MatplotlibCache (as the
// code-interpreter image has), matplotlib's first import in a kernel finds it copied into the
// user's cache directory and builds none; without one, it builds its own.
func TestMatplotlibFontCache(t *testing.T) {
	prebuilt := t.TempDir()
	build := exec.Command(debianPython, "-c", "import matplotlib.font_manager")
	build.Env = append(os.Environ(), "MPLCONFIGDIR="+prebuilt, "MPLBACKEND=Agg")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a font cache: %v\n%s", err, out)
	}
	caches, _ := filepath.Glob(filepath.Join(prebuilt, "fontlist-*.json"))
	if len(caches) != 1 {
		t.Fatalf("matplotlib wrote %v into %s; want one fontlist-*.json", caches, prebuilt)
	}
	want, err := os.ReadFile(caches[0])
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, dir string
		seeded    bool
	}{{"prebuilt", prebuilt, true}, {"none", t.TempDir(), false}} {
		t.Run(c.name, func(t *testing.T) {
			_, url := newServer(t, func(cfg *Config) { cfg.MatplotlibCache = c.dir })
			lines := execute(t, url, map[string]any{"code": "import logging, os\nlogging.basicConfig(level=logging.INFO)\nimport matplotlib.pyplot as plt\nos.path.expanduser('~')"})
			if e := errorOf(lines); e != nil {
				t.Fatalf("importing matplotlib: %v", e)
			}
			home := mainText(lines)
			built := strings.Contains(stdout(lines, lineStderr), fontCacheBuilt)
			if built == c.seeded {
				t.Errorf("matplotlib built its font cache: %v, want %v (stderr %q)", built, !c.seeded, stdout(lines, lineStderr))
			}
			got, err := os.ReadFile(filepath.Join(home, ".cache", "matplotlib", filepath.Base(caches[0])))
			if c.seeded && (err != nil || !bytes.Equal(got, want)) {
				t.Errorf("the user's font cache is not the prebuilt one: %v", err)
			}
		})
	}
}
