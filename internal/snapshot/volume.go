package snapshot

import (
	"fmt"
	"path"
	"strings"
)

// Volume is one volume to capture: its name in the Pod (the Sandbox's volumeClaimTemplate) and
// where the captured container mounts it.
type Volume struct {
	Name      string
	MountPath string
}

// ParseVolume reads NAME=MOUNTPATH (the --volume flag).
func ParseVolume(s string) (Volume, error) {
	name, p, ok := strings.Cut(s, "=")
	if !ok || name == "" || !path.IsAbs(p) {
		return Volume{}, fmt.Errorf("--volume %q: want NAME=/mount/path (the volume's name and where the container mounts it)", s)
	}
	return Volume{Name: name, MountPath: path.Clean(p)}, nil
}

// RestoreBinaryName is the restore binary's name in a snapshot image that holds volumes, under
// its reserved directory (layer.ReservedDir).
const RestoreBinaryName = "paddock-snapshot"

// RestoreBinaryPath is where the restore init container finds the binary in the image.
const RestoreBinaryPath = "/.paddock/" + RestoreBinaryName
