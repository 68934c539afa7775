package envimage

import (
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/paddock-dev/paddock/internal/image"
)

// Labels of an environment image's config. The complete package list is too long for a label
// (some registries and tools cap a config's size), so the labels hold the requested packages with
// their versions and the full list's size and digest, and the list itself is PackagesFile.
const (
	LabelTitle          = "org.opencontainers.image.title"
	LabelDescription    = "org.opencontainers.image.description"
	LabelSuite          = "dev.paddock.env.suite"
	LabelPackages       = "dev.paddock.env.packages"
	LabelPackagesFile   = "dev.paddock.env.packages-file"
	LabelPackagesCount  = "dev.paddock.env.packages-count"
	LabelPackagesSHA256 = "dev.paddock.env.packages-sha256"
	LabelSetuid         = "dev.paddock.env.setuid"
	LabelKey            = "dev.paddock.env.key"
	// LabelFrom names the image an extended recipe's layers go on top of, with its key.
	LabelFrom = "dev.paddock.env.from"
)

// Env is the environment of every environment image. Login shells (E2B runs commands with
// bash -l) get the same PATH from /etc/profile.d/paddock-env.sh.
var Env = []string{
	"PATH=" + VenvDir + "/bin:" + NPMPrefix + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"VIRTUAL_ENV=" + VenvDir,
	"LANG=C.UTF-8",
}

// Image is the environment image of fs (its base's layer first, for an extended recipe) with the
// static sandboxd binary at sandboxd on top, in a layer of its own, run as the entrypoint by the
// user uid 1000 in /home/user.
func Image(fs *RootFS, sandboxd string) (v1.Image, error) {
	layers, err := fs.layers()
	if err != nil {
		return nil, err
	}
	top, err := image.NewTree().AddFile(SandboxdPath, sandboxd, 0o755).Layer()
	if err != nil {
		return nil, err
	}
	uid := strconv.Itoa(UID)
	return image.FromLayers(image.Config{
		Entrypoint: []string{SandboxdPath},
		Env:        Env,
		User:       uid + ":" + uid,
		WorkingDir: "/home/user",
		Labels:     fs.Labels(),
	}, append(layers, top)...)
}

// layers are the root filesystem's layers, bottom first.
func (fs *RootFS) layers() ([]v1.Layer, error) {
	var below []v1.Layer
	if fs.Base != nil {
		var err error
		if below, err = fs.Base.layers(); err != nil {
			return nil, err
		}
	}
	l, err := image.CompressedFileLayer(filepath.Join(fs.Dir, layerFile), fs.Layer)
	if err != nil {
		return nil, err
	}
	return append(below, l), nil
}

// Labels describe what fs holds (the image's labels).
func (fs *RootFS) Labels() map[string]string {
	versions := map[string]string{}
	for _, p := range fs.Packages {
		versions[p.Name] = p.Version
	}
	requested := make([]string, 0, len(fs.Recipe.Packages))
	for _, p := range fs.Recipe.sortedPackages() {
		requested = append(requested, p+"="+versions[p])
	}
	labels := map[string]string{
		LabelTitle:          fs.Recipe.Name,
		LabelDescription:    fs.Recipe.Description,
		LabelSuite:          fs.Recipe.Suite,
		LabelPackages:       strings.Join(requested, " "),
		LabelPackagesFile:   PackagesFile,
		LabelPackagesCount:  strconv.Itoa(len(fs.Packages)),
		LabelPackagesSHA256: fs.PackagesSHA256,
		LabelSetuid:         strings.Join(fs.Setuid, " "),
		LabelKey:            fs.Key,
	}
	if fs.Base != nil {
		labels[LabelFrom] = fs.Base.Recipe.Name + " " + fs.Base.Key
	}
	return labels
}
