package envimage

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/image"
)

// DefaultMirrors are the apt sources of a build: Debian's archive with its security and
// point-release updates.
var DefaultMirrors = []string{
	"http://deb.debian.org/debian",
	"deb http://deb.debian.org/debian bookworm-updates main",
	"deb http://deb.debian.org/debian-security bookworm-security main",
}

// BuildOptions say where Build keeps its cache and how it runs mmdebstrap.
type BuildOptions struct {
	// CacheDir holds the built root filesystems under env/; empty means DefaultCacheDir().
	CacheDir string
	// Mirrors are mmdebstrap's apt sources (a URL or a sources.list line each); empty means
	// DefaultMirrors. They are not part of the cache key.
	Mirrors []string
	// Progress receives what the build is doing, a line at a time; nil discards it.
	Progress io.Writer
	// Command is the mmdebstrap executable; empty means mmdebstrap on PATH.
	Command string
	// Heartbeat is how often a long build says it is still running; zero means every 30 s.
	Heartbeat time.Duration
}

// DefaultCacheDir is the cache the hack/ build scripts share: $PADDOCK_CACHE_DIR, else
// $XDG_CACHE_HOME/paddock, else ~/.cache/paddock.
func DefaultCacheDir() string {
	if d := os.Getenv("PADDOCK_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "paddock")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "paddock")
}

// setIDBits are the setuid and setgid bits of a tar header's mode.
const setIDBits = 0o6000

// Files of a built root filesystem in its cache directory.
const (
	layerFile    = "layer.tar.gz"
	packagesFile = "packages.txt"
	recordFile   = "rootfs.json"
)

// RootFS is a root filesystem built into the cache.
type RootFS struct {
	// Recipe is what it was built from.
	Recipe Recipe `json:"-"`
	// Dir is its cache directory.
	Dir string `json:"-"`
	// Key is the recipe's key when it was built.
	Key string `json:"key"`
	// Layer describes the compressed layer file.
	Layer image.LayerInfo `json:"layer"`
	// Packages are the installed packages, as PackagesFile in the image lists them.
	Packages []Package `json:"-"`
	// PackagesSHA256 is the SHA-256 of PackagesFile.
	PackagesSHA256 string `json:"packagesSHA256"`
	// Setuid lists the regular files with the setuid or setgid bit, as the packages install them.
	Setuid []string `json:"setuid"`
	// Tool is the mmdebstrap that built it, with its version.
	Tool string `json:"tool"`
	// Built is when the build ended, and BuildSeconds how long it took.
	Built        time.Time `json:"built"`
	BuildSeconds float64   `json:"buildSeconds"`
}

// Package is one installed Debian package.
type Package struct {
	Name, Version, Architecture string
}

// Build returns the recipe's root filesystem from the cache, building it with mmdebstrap first
// when the cache has none for the recipe's key. built says whether it ran mmdebstrap. Builds of
// one recipe on one machine take turns.
func Build(ctx context.Context, r Recipe, opts BuildOptions) (fs *RootFS, built bool, err error) {
	if err := r.Validate(); err != nil {
		return nil, false, err
	}
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir()
	}
	envDir := filepath.Join(opts.CacheDir, "env")
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		return nil, false, err
	}
	dir := CacheDirOf(r, opts.CacheDir)
	if fs, err := Load(r, dir); err == nil {
		return fs, false, nil
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	// Another build of the same key may have finished while this one waited.
	if fs, err := Load(r, dir); err == nil {
		return fs, false, nil
	}
	fs, err = build(ctx, r, opts, envDir, dir)
	return fs, err == nil, err
}

// CacheDirOf is where the root filesystem of r is, or will be, in cacheDir.
func CacheDirOf(r Recipe, cacheDir string) string {
	return filepath.Join(cacheDir, "env", r.dirName())
}

func lockFile(p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return func() { f.Close() }, nil
}

// Load reads the root filesystem of r built into dir, and fails when any part is missing or
// does not match its record.
func Load(r Recipe, dir string) (*RootFS, error) {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	fs := &RootFS{Recipe: r, Dir: dir}
	if err := json.Unmarshal(data, fs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, recordFile), err)
	}
	if fs.Key != r.Key() {
		return nil, fmt.Errorf("%s was built for key %s, not %s", dir, fs.Key, r.Key())
	}
	list, err := os.ReadFile(filepath.Join(dir, packagesFile))
	if err != nil {
		return nil, err
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(list)); sum != fs.PackagesSHA256 {
		return nil, fmt.Errorf("%s has SHA-256 %s, its record says %s", filepath.Join(dir, packagesFile), sum, fs.PackagesSHA256)
	}
	if fs.Packages, err = parsePackages(list); err != nil {
		return nil, err
	}
	st, err := os.Stat(filepath.Join(dir, layerFile))
	if err != nil {
		return nil, err
	}
	if st.Size() != fs.Layer.Size {
		return nil, fmt.Errorf("%s has %d bytes, its record says %d", filepath.Join(dir, layerFile), st.Size(), fs.Layer.Size)
	}
	return fs, nil
}

// build runs mmdebstrap into a temporary directory beside dir, compressing its tar stream as it
// comes, and renames the directory into place only when everything is written and checked.
func build(ctx context.Context, r Recipe, opts BuildOptions, envDir, dir string) (*RootFS, error) {
	tool := opts.Command
	if tool == "" {
		tool = "mmdebstrap"
	}
	bin, err := exec.LookPath(tool)
	if err != nil {
		return nil, fmt.Errorf("the %s image is built by mmdebstrap, which is not installed: apt-get install -y mmdebstrap (%w)", r.Name, err)
	}
	tmp, err := os.MkdirTemp(envDir, "."+r.Name+"-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	// The hook runs from a file: inline, mmdebstrap would print all of it as one progress line.
	hook := filepath.Join(tmp, "customize.sh")
	if err := os.WriteFile(hook, []byte(r.hook()), 0o644); err != nil {
		return nil, err
	}
	mirrors := opts.Mirrors
	if len(mirrors) == 0 {
		mirrors = DefaultMirrors
	}
	start := time.Now()
	progress := newProgress(opts.Progress, r.Name, opts.Heartbeat)
	defer progress.stop()
	progress.line(fmt.Sprintf("building the Debian %s root filesystem with %s (first build on this machine takes minutes) into %s", r.Suite, tool, dir))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, slices.Concat(r.options(`sh '`+hook+`' "$1"`), []string{r.Suite, "-"}, mirrors)...)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+sourceDateEpoch)
	// Stopped, mmdebstrap unmounts what it mounted in its chroot and removes it; killed, it
	// would leave them behind.
	cmd.Cancel = func() error { return cmd.Process.Signal(unix.SIGTERM) }
	cmd.WaitDelay = time.Minute
	cmd.Stderr = progress
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(tmp, layerFile))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	fs := &RootFS{Recipe: r, Dir: dir, Key: r.Key(), Tool: toolVersion(bin)}
	var list []byte
	w := bufio.NewWriterSize(out, 1<<20)
	info, cerr := image.CompressTar(w, stdout, func(h *tar.Header, content io.Reader) error {
		name := path.Clean("/" + h.Name)
		if h.Typeflag == tar.TypeReg && h.Mode&setIDBits != 0 {
			fs.Setuid = append(fs.Setuid, name)
		}
		if name == PackagesFile {
			var err error
			list, err = io.ReadAll(content)
			return err
		}
		return nil
	})
	if cerr != nil {
		cancel() // mmdebstrap would block on a pipe nobody reads
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s %s for the %s image failed: %w; its last lines:\n%s", tool, r.Suite, r.Name, err, progress.tail())
	}
	if cerr != nil {
		return nil, cerr
	}
	if err := errors.Join(w.Flush(), out.Close()); err != nil {
		return nil, err
	}
	if list == nil {
		return nil, fmt.Errorf("the root filesystem %s built has no %s: the recipe's customize hook did not run", tool, PackagesFile)
	}
	if fs.Packages, err = parsePackages(list); err != nil {
		return nil, err
	}
	if missing := missingPackages(r.Packages, fs.Packages); len(missing) > 0 {
		return nil, fmt.Errorf("%s lists no %s: the %s recipe asks for them", PackagesFile, strings.Join(missing, ", "), r.Name)
	}
	fs.Layer = info
	fs.PackagesSHA256 = fmt.Sprintf("%x", sha256.Sum256(list))
	fs.Built = time.Now().UTC().Round(time.Second)
	fs.BuildSeconds = time.Since(start).Round(time.Second).Seconds()
	record, err := json.MarshalIndent(fs, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := errors.Join(os.WriteFile(filepath.Join(tmp, packagesFile), list, 0o644),
		os.WriteFile(filepath.Join(tmp, recordFile), append(record, '\n'), 0o644)); err != nil {
		return nil, err
	}
	// A directory that failed to load is stale (an older format or a damaged file).
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	progress.line(fmt.Sprintf("built in %s: %d packages, layer %d MiB compressed, %d MiB unpacked",
		time.Since(start).Round(time.Second), len(fs.Packages), fs.Layer.Size>>20, fs.Layer.UnpackedSize>>20))
	return fs, nil
}

// toolVersion is the builder's --version line, recorded with the build.
func toolVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return filepath.Base(bin)
	}
	return strings.TrimSpace(string(out))
}

// parsePackages reads PackagesFile: name, version and architecture, tab-separated, one a line.
func parsePackages(list []byte) ([]Package, error) {
	var pkgs []Package
	for i, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("%s line %d is %q; want NAME<TAB>VERSION<TAB>ARCHITECTURE", PackagesFile, i+1, line)
		}
		pkgs = append(pkgs, Package{Name: f[0], Version: f[1], Architecture: f[2]})
	}
	return pkgs, nil
}

func missingPackages(want []string, have []Package) []string {
	installed := map[string]bool{}
	for _, p := range have {
		installed[p.Name] = true
	}
	var missing []string
	for _, w := range want {
		if !installed[w] {
			missing = append(missing, w)
		}
	}
	return missing
}
