package layer

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// VolumesDir is the reserved directory of a snapshot image that holds its volumes: one
// directory per captured volume, VolumesDir/<volume name>/, with the volume's root as that
// directory. The layer that writes it marks ReservedDir opaque, so that nothing the sandbox
// wrote to its root filesystem at that path survives under it.
const (
	ReservedDir = ".paddock"
	VolumesDir  = ReservedDir + "/volumes"
)

// Volumes writes one layer holding volumes: plain directory trees (not overlay upper
// directories) under VolumesDir, and files the restore needs (the restore binary). The same
// rules as FromUpperDir apply to every tree (no link followed, no device, no FIFO opened, the
// byte budget, names), with one difference: a character device 0:0 is a device here, not a
// deletion, and overlay attributes are ignored.
type Volumes struct {
	w *writer
}

// NewVolumes starts a volume layer on out and writes ReservedDir as an opaque directory.
func NewVolumes(out io.Writer, o Options) (*Volumes, error) {
	v := &Volumes{w: newWriter(out, o)}
	h := &tar.Header{Typeflag: tar.TypeDir, Name: ReservedDir + "/", Mode: 0o755, ModTime: time.Unix(0, 0).UTC()}
	if err := v.w.header(h); err != nil {
		return nil, err
	}
	if err := v.w.opaque(ReservedDir, h); err != nil {
		return nil, err
	}
	h = &tar.Header{Typeflag: tar.TypeDir, Name: VolumesDir + "/", Mode: 0o755, ModTime: time.Unix(0, 0).UTC()}
	return v, v.w.header(h)
}

// File writes a regular file at name (under ReservedDir) with size bytes from r.
func (v *Volumes) File(name string, r io.Reader, size int64, mode int64) error {
	p := path.Join(ReservedDir, name)
	if err := v.w.charge("/"+p, size); err != nil {
		return err
	}
	if err := v.w.header(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: size, Mode: mode, ModTime: time.Unix(0, 0).UTC()}); err != nil {
		return err
	}
	if _, err := io.CopyN(v.w.tw, r, size); err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	return nil
}

// Add writes the tree of the directory dir (opened without following a link) as
// VolumesDir/<name>/: the root directory's owner and mode, then its contents.
func (v *Volumes) Add(name, dir string) error {
	if err := validName(VolumesDir, name); err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening volume %s at %s: %w", name, dir, err)
	}
	defer unix.Close(fd)
	return v.AddFD(name, fd)
}

// AddFD is Add for a directory already open (fd is not closed).
func (v *Volumes) AddFD(name string, fd int) error {
	if err := validName(VolumesDir, name); err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("volume %s: its root is not a directory", name)
	}
	prefix := path.Join(VolumesDir, name)
	h := headerOf("", &st)
	h.Typeflag, h.Name = tar.TypeDir, prefix+"/"
	if err := v.w.header(h); err != nil {
		return err
	}
	// Hard links are kept within one volume: each tree has its own table and prefix.
	v.w.prefix, v.w.files = prefix, map[any]string{}
	defer func() { v.w.prefix = "" }()
	u := &upper{writer: v.w, plain: true}
	return u.walk(fd, "", 0)
}

// Stats describe what was written so far.
func (v *Volumes) Stats() Stats { return v.w.stats }

// Close ends the layer.
func (v *Volumes) Close() error { return v.w.close() }
