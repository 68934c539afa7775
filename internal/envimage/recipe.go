// Package envimage builds Paddock's environment images without a container engine: a Debian
// root filesystem that mmdebstrap installs from the Debian archive, compressed once into an OCI
// layer cached under ~/.cache/paddock by the recipe's inputs, with sandboxd as a separate layer
// on top, so that a new sandboxd pushes a few megabytes and never the Debian layer again.
//
// What is inside is recorded in the image: every installed package with its version in
// PackagesFile, and a summary in the image config's labels (docs/environments.md).
package envimage

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock/api/sandboxd"
)

// Recipe is an environment image: a Debian suite and the packages installed into it.
type Recipe struct {
	// Name names the image and its cache directory, for example "env-base".
	Name string
	// Description is the image's one-line summary (label org.opencontainers.image.description).
	Description string
	// Suite is the Debian release, for example "bookworm".
	Suite string
	// Architecture is Debian's name for the CPU, for example "amd64".
	Architecture string
	// Packages are installed with their dependencies, not their recommendations.
	Packages []string
	// Customize is shell run after the common customize hook, on the same root filesystem
	// ("$root"), as root: what one image adds to the common setup.
	Customize string
}

// Base is env-base: what code that agents write most often calls.
var Base = Recipe{
	Name:         "env-base",
	Description:  "Debian bookworm with Python 3 (pip, venv), Node.js (npm), git, curl, wget and a C toolchain, run by sandboxd as uid 1000",
	Suite:        "bookworm",
	Architecture: "amd64",
	Packages: []string{
		// Python with pip and venv; python3-dev and the compilers build C extensions on pip install.
		"python3", "python3-pip", "python3-venv", "python3-dev",
		"nodejs", "npm",
		"git", "curl", "wget", "ca-certificates", "netcat-openbsd",
		"gcc", "g++", "make", "libc6-dev",
		"unzip", "zip", "xz-utils", "bzip2", "patch", "file",
		"jq", "procps", "less", "vim-tiny", "nano",
	},
}

// CodeInterpreter is env-base with the Python data stack that E2B's code-interpreter template
// offers (numpy, pandas, matplotlib, scipy, seaborn, requests, from Debian), for sandboxd's code
// interpreter (--interpreter-port). Its packages extend Base's, so env-base's tools are all there.
var CodeInterpreter = Base.Extend("code-interpreter",
	"env-base with Debian's numpy, pandas, matplotlib, scipy, seaborn and requests, for sandboxd's code interpreter on port 49999",
	"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy", "python3-seaborn", "python3-requests",
	// matplotlib's Agg backend draws charts to PNG with Pillow; listed because the interpreter
	// needs it, though matplotlib depends on it.
	"python3-pil").Then(matplotlibFontCache)

// matplotlibFontCache builds matplotlib's font cache into sandboxd.MatplotlibFontCacheDir, from
// which the code interpreter's kernel copies it into the user's cache directory (the user's home
// is a volume in E2B templates, so the image cannot put it there).
var matplotlibFontCache = `dir=` + sandboxd.MatplotlibFontCacheDir + `
mkdir -p "$root$dir"
chroot "$root" env MPLCONFIGDIR="$dir" MPLBACKEND=Agg PYTHONHASHSEED=0 python3 -c 'import matplotlib.font_manager'
ls "$root$dir"/fontlist-*.json >/dev/null
`

// Recipes are the environment images `paddock dev up` builds and pushes, in build order.
var Recipes = []Recipe{Base, CodeInterpreter}

// Extend is r under another name and description with more packages: everything else (suite,
// architecture, the customize hook) is r's, so the two images differ only by those packages.
func (r Recipe) Extend(name, description string, packages ...string) Recipe {
	r.Name, r.Description = name, description
	r.Packages = slices.Concat(r.Packages, packages)
	return r
}

// Then is r with script run after the common customize hook (after r's own Customize).
func (r Recipe) Then(script string) Recipe {
	r.Customize += script
	return r
}

// hook is the script mmdebstrap runs on the finished root filesystem: the common hook, then the
// recipe's own.
func (r Recipe) hook() string { return customizeHook + r.Customize }

// Paths and the account inside every environment image.
const (
	// PackagesFile lists every installed package: name, version and architecture, tab-separated.
	PackagesFile = "/etc/paddock/packages.txt"
	// VenvDir is the user's Python virtual environment, first on PATH, which also sees Debian's
	// Python packages: pip installs there with no flags, though Debian marks its Python externally
	// managed.
	VenvDir = "/opt/venv"
	// NPMPrefix is where `npm install -g` puts packages, owned by the user.
	NPMPrefix = "/opt/npm"
	// SandboxdPath is where the top layer puts sandboxd, the image's entrypoint.
	SandboxdPath = "/usr/local/bin/sandboxd"
	// UID is the user `user` (home /home/user) the image runs as.
	UID = 1000
)

// recipeFormat changes whenever the way a recipe becomes a layer changes beyond mmdebstrap's
// arguments (which the key covers), so that layers built the old way are built again.
const recipeFormat = 1

// sourceDateEpoch fixes every timestamp mmdebstrap writes (and Python's bytecode of the virtual
// environment), so that the same archive contents give the same layer.
const sourceDateEpoch = "1700000000"

// Key identifies what the recipe builds: its suite, architecture, packages and every argument
// mmdebstrap gets but the mirrors. The same key means the cached layer can be used as it is.
func (r Recipe) Key() string {
	in, _ := json.Marshal(struct {
		Format       int
		Suite        string
		Architecture string
		Packages     []string
		Args         []string
	}{recipeFormat, r.Suite, r.Architecture, r.sortedPackages(), r.options(r.hook())})
	return fmt.Sprintf("%x", sha256.Sum256(in))[:16]
}

// dirName is the recipe's directory in the cache: readable, and unique to its key.
func (r Recipe) dirName() string {
	return strings.Join([]string{r.Name, r.Suite, r.Architecture, r.Key()}, "-")
}

func (r Recipe) sortedPackages() []string {
	p := slices.Clone(r.Packages)
	slices.Sort(p)
	return slices.Compact(p)
}

// Validate reports what would make mmdebstrap fail or the cache key ambiguous.
func (r Recipe) Validate() error {
	switch {
	case r.Name == "" || strings.ContainsAny(r.Name, "/ "):
		return fmt.Errorf("environment recipe name %q must be a non-empty word, such as env-base", r.Name)
	case r.Suite == "" || r.Architecture == "":
		return fmt.Errorf("environment recipe %s needs a Debian suite and architecture, such as bookworm and amd64", r.Name)
	case len(r.Packages) == 0:
		return fmt.Errorf("environment recipe %s lists no packages", r.Name)
	}
	for _, p := range r.Packages {
		if p == "" || strings.ContainsAny(p, ", \t") {
			return fmt.Errorf("environment recipe %s: package %q is not a Debian package name", r.Name, p)
		}
	}
	return nil
}

// options are mmdebstrap's arguments before the suite: what to install and hook, the command
// that makes the root filesystem Paddock's (customizeHook, or a command running it).
func (r Recipe) options(hook string) []string {
	return []string{
		// Essential packages and apt; the recipe names everything else.
		"--variant=apt",
		"--arch=" + r.Architecture,
		"--format=tar",
		"--aptopt=APT::Install-Recommends \"false\"",
		// Documentation and translations nobody reads in a sandbox; license texts stay.
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--include=" + strings.Join(r.sortedPackages(), ","),
		"--customize-hook=" + hook,
	}
}

// customizeHook runs on the finished root filesystem ($1): the account, the user's Python and
// npm prefixes, their configuration, and the package list. Every path it writes is fixed, and
// Python compiles with SOURCE_DATE_EPOCH set, so the result stays reproducible.
const customizeHook = `set -eu
root="$1"
echo 'user:x:1000:1000:user:/home/user:/bin/bash' >> "$root/etc/passwd"
echo 'user:x:1000:' >> "$root/etc/group"
if [ -e "$root/etc/shadow" ]; then echo 'user:*:19675:0:99999:7:::' >> "$root/etc/shadow"; fi
install -d -o 1000 -g 1000 -m 0755 "$root/home/user" "$root/workspace" "$root/opt/npm"
chroot "$root" python3 -m venv --system-site-packages /opt/venv
chown -R 1000:1000 "$root/opt/venv"
cat > "$root/etc/profile.d/paddock-env.sh" <<'EOF'
# Paddock: pip installs into the user's virtual environment and npm -g into /opt/npm, so both
# work without flags (docs/environments.md). Login shells reset PATH in /etc/profile.
PATH="/opt/venv/bin:/opt/npm/bin:$PATH"
VIRTUAL_ENV=/opt/venv
export PATH VIRTUAL_ENV
EOF
cat > "$root/etc/pip.conf" <<'EOF'
[global]
# No request to PyPI on every pip command just to compare versions.
disable-pip-version-check = true
EOF
cat > "$root/etc/npmrc" <<'EOF'
prefix=/opt/npm
update-notifier=false
fund=false
EOF
mkdir -p "$root/etc/paddock"
chroot "$root" dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n' | LC_ALL=C sort > "$root/etc/paddock/packages.txt"
`
