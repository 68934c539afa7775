package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// SpecMount is one mount of a container's OCI runtime spec: Source is the host path the
// kubelet prepared (a bind mount, under runc and gVisor alike).
type SpecMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type,omitempty"`
	Source      string   `json:"source,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// specMounts reads the mounts of an OCI runtime spec (JSON).
func specMounts(spec []byte) ([]SpecMount, error) {
	var s struct {
		Mounts []SpecMount `json:"mounts"`
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, fmt.Errorf("reading the container's OCI spec: %w", err)
	}
	return s.Mounts, nil
}

// volumeSource finds the host directory of the bind mount at v.MountPath.
func volumeSource(mounts []SpecMount, v snapshot.Volume) (string, error) {
	for _, m := range mounts {
		if path.Clean(m.Destination) != v.MountPath {
			continue
		}
		if !isBind(m) || !path.IsAbs(m.Source) {
			return "", fmt.Errorf("volume %s: the mount at %s is not a bind mount of a host directory (type %q)", v.Name, v.MountPath, m.Type)
		}
		return m.Source, nil
	}
	return "", fmt.Errorf("volume %s: the container has no mount at %s", v.Name, v.MountPath)
}

func isBind(m SpecMount) bool {
	if m.Type == "bind" {
		return true
	}
	for _, o := range m.Options {
		if o == "bind" || o == "rbind" {
			return true
		}
	}
	return false
}

// openVolumes opens the host directory of each volume under hostRoot (the node's root as the
// capture Pod mounts it), resolving the path inside that
// root and following no link at its end: the descriptors are what the capture reads while the
// container is paused.
func openVolumes(hostRoot string, mounts []SpecMount, vols []snapshot.Volume) ([]int, error) {
	root, err := unix.Open(hostRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the node's root %s: %w", hostRoot, err)
	}
	defer unix.Close(root)
	var fds []int
	for _, v := range vols {
		src, err := volumeSource(mounts, v)
		if err == nil {
			var fd int
			fd, err = unix.Openat2(root, strings.TrimPrefix(src, "/"), &unix.OpenHow{
				Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
			})
			if err != nil {
				err = fmt.Errorf("volume %s: opening %s on the node: %w", v.Name, src, err)
			} else {
				fds = append(fds, fd)
				continue
			}
		}
		closeAll(fds)
		return nil, err
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// startVolumeLayer creates the volume layer in f: the reserved directory and the restore binary
// (a copy of bin), written before the pause.
func startVolumeLayer(f *os.File, bin string, o layer.Options) (*layer.Volumes, error) {
	v, err := layer.NewVolumes(f, o)
	if err != nil {
		return nil, err
	}
	b, err := os.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("opening the restore binary %s: %w", bin, err)
	}
	defer b.Close()
	st, err := b.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("the restore binary " + bin + " is not a regular file")
	}
	return v, v.File(snapshot.RestoreBinaryName, b, st.Size(), 0o755)
}
