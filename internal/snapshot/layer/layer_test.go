package layer

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// entry is what a test compares of one tar entry.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
	Content  string
}

func readLayer(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the layer: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{Name: h.Name, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Link: h.Linkname, Content: string(data)})
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (device nodes, owners, trusted.* xattrs); CI runs as root")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, unix.Chmod(p, uint32(mode))) // past the umask; raw bits, so 0o4000 is setuid
}

func capture(t *testing.T, dir string, o Options) ([]byte, Stats, error) {
	t.Helper()
	var buf bytes.Buffer
	st, err := FromUpperDir(dir, &buf, o)
	return buf.Bytes(), st, err
}

func opts() Options { return Options{Limits: DefaultLimits()} }

// TestUpperDirTree: files, modes, owners, directories, symlinks (recorded, not followed), hard
// links, FIFOs, whiteouts and opaque directories come out as OCI entries.
func TestUpperDirTree(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "host secret", 0o600)

	write(t, filepath.Join(root, "etc/app.conf"), "a=1\n", 0o644)
	write(t, filepath.Join(root, "usr/bin/tool"), "#!/bin/sh\n", 0o4755)
	must(t, os.Chown(filepath.Join(root, "usr/bin/tool"), 1000, 2000))
	must(t, unix.Chmod(filepath.Join(root, "usr/bin/tool"), 0o4755)) // chown cleared setuid
	must(t, os.Symlink("/etc/shadow", filepath.Join(root, "etc/abs-link")))
	must(t, os.Symlink("../../../../"+outside+"/secret", filepath.Join(root, "etc/rel-link")))
	must(t, os.Link(filepath.Join(root, "etc/app.conf"), filepath.Join(root, "etc/app.hard")))
	must(t, unix.Mkfifo(filepath.Join(root, "etc/pipe"), 0o640))
	must(t, unix.Mknod(filepath.Join(root, "etc/deleted"), unix.S_IFCHR, 0)) // overlay whiteout: character device 0:0
	must(t, os.MkdirAll(filepath.Join(root, "opt/fresh"), 0o750))
	must(t, unix.Setxattr(filepath.Join(root, "opt/fresh"), "trusted.overlay.opaque", []byte("y"), 0))
	must(t, os.Chmod(filepath.Join(root, "opt/fresh"), 0o750))
	for _, d := range []string{"etc", "usr", "usr/bin", "opt"} {
		must(t, os.Chmod(filepath.Join(root, d), 0o755))
	}

	b, st, err := capture(t, root, opts())
	if err != nil {
		t.Fatalf("FromUpperDir: %v", err)
	}
	want := []entry{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/abs-link", Type: tar.TypeSymlink, Mode: 0o777, Link: "/etc/shadow"},
		{Name: "etc/app.conf", Type: tar.TypeReg, Mode: 0o644, Content: "a=1\n"},
		{Name: "etc/app.hard", Type: tar.TypeLink, Mode: 0o644, Link: "etc/app.conf"},
		{Name: "etc/.wh.deleted", Type: tar.TypeReg, Mode: 0o600},
		{Name: "etc/pipe", Type: tar.TypeFifo, Mode: 0o640},
		{Name: "etc/rel-link", Type: tar.TypeSymlink, Mode: 0o777, Link: "../../../../" + outside + "/secret"},
		{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/fresh/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "opt/fresh/.wh..wh..opq", Type: tar.TypeReg, Mode: 0o600},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/tool", Type: tar.TypeReg, Mode: 0o4755, UID: 1000, GID: 2000, Content: "#!/bin/sh\n"},
	}
	if d := cmp.Diff(want, readLayer(t, b)); d != "" {
		t.Errorf("layer (-want +got):\n%s", d)
	}
	if st.Whiteouts != 2 || st.ContentBytes != int64(len("a=1\n")+len("#!/bin/sh\n")) {
		t.Errorf("stats %+v: want 2 whiteouts and the two files' bytes", st)
	}
	if bytes.Contains(b, []byte("host secret")) {
		t.Error("the layer holds the content of a file outside the tree")
	}
}

// TestUpperDirRefuses: what cannot be stored safely fails the capture with the path named.
func TestUpperDirRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		root bool
		make func(t *testing.T, root string)
		o    func(*Options)
		want string
	}{
		"char device": {root: true, make: func(t *testing.T, root string) {
			must(t, unix.Mknod(filepath.Join(root, "tty"), unix.S_IFCHR|0o600, int(unix.Mkdev(5, 0))))
		}, want: "/tty: a device node (5:0)"},
		"block device": {root: true, make: func(t *testing.T, root string) {
			must(t, unix.Mknod(filepath.Join(root, "sda"), unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))))
		}, want: "/sda: a block device"},
		"whiteout-looking name": {make: func(t *testing.T, root string) {
			write(t, filepath.Join(root, "tmp/.wh.passwd"), "x", 0o644)
		}, want: `/tmp/.wh.passwd: names starting with ".wh."`},
		"sparse file over the budget": {make: func(t *testing.T, root string) {
			f, err := os.Create(filepath.Join(root, "huge"))
			must(t, err)
			must(t, f.Truncate(1<<40)) // a terabyte of holes
			must(t, f.Close())
		}, o: func(o *Options) { o.MaxBytes = 1 << 20 }, want: "/huge: its 1099511627776 bytes would take the layer past its limit of 1048576 bytes"},
		"too many entries": {make: func(t *testing.T, root string) {
			for _, n := range []string{"a", "b", "c"} {
				write(t, filepath.Join(root, n), n, 0o644)
			}
		}, o: func(o *Options) { o.MaxEntries = 2 }, want: "more than 2 entries"},
		"too deep": {make: func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, "a/b/c/d"), 0o755))
		}, o: func(o *Options) { o.MaxDepth = 2 }, want: "deeper than 2 directories"},
		"redirected directory": {root: true, make: func(t *testing.T, root string) {
			must(t, os.Mkdir(filepath.Join(root, "moved"), 0o755))
			must(t, unix.Setxattr(filepath.Join(root, "moved"), "trusted.overlay.redirect", []byte("/orig"), 0))
		}, want: "redirect_dir or metacopy"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			root := t.TempDir()
			tc.make(t, root)
			o := opts()
			if tc.o != nil {
				tc.o(&o)
			}
			b, _, err := capture(t, root, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if len(b) > 1<<20+64<<10 {
				t.Errorf("wrote %d bytes before failing", len(b))
			}
		})
	}
}

// TestUpperDirRootIsLink: the upper directory itself must not be a link.
func TestUpperDirRootIsLink(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Symlink(t.TempDir(), filepath.Join(dir, "upper")))
	if _, _, err := capture(t, filepath.Join(dir, "upper"), opts()); err == nil {
		t.Fatal("FromUpperDir followed a symlink as its root")
	}
}

// TestUpperDirSkipsSocketsAndExcluded: sockets and excluded paths are left out and listed.
func TestUpperDirSkipsSocketsAndExcluded(t *testing.T) {
	root := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(t, err)
	defer l.Close()
	write(t, filepath.Join(root, "run/secrets/token"), "tok", 0o600)
	write(t, filepath.Join(root, "keep"), "k", 0o644)
	o := opts()
	o.Exclude = []string{"/run/secrets"}
	b, st, err := capture(t, root, o)
	must(t, err)
	var names []string
	for _, e := range readLayer(t, b) {
		names = append(names, e.Name)
	}
	if d := cmp.Diff([]string{"keep", "run/"}, names); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"run/secrets (excluded)", "sock (socket)"}, st.Skipped); d != "" {
		t.Errorf("skipped (-want +got):\n%s", d)
	}
}

// TestUpperDirRaces: an entry swapped for a link to the host between listing and opening, or a
// file written during the copy, fails the capture without reading outside the tree.
func TestUpperDirRaces(t *testing.T) {
	t.Run("directory swapped for a symlink", func(t *testing.T) {
		root, outside := t.TempDir(), t.TempDir()
		write(t, filepath.Join(outside, "secret"), "host secret", 0o600)
		must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
		var buf bytes.Buffer
		w := newWriter(&buf, opts())
		u := &upper{writer: w, beforeOpen: func(rel string) {
			if rel == "d" {
				must(t, os.Remove(filepath.Join(root, "d")))
				must(t, os.Symlink(outside, filepath.Join(root, "d")))
			}
		}}
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		defer unix.Close(fd)
		if err := u.walk(fd, "", 0); err == nil {
			t.Fatal("the walk went on after /d became a symlink")
		}
		if bytes.Contains(buf.Bytes(), []byte("host secret")) || strings.Contains(buf.String(), "secret") {
			t.Error("the layer holds something from outside the tree")
		}
	})
	t.Run("file replaced by a FIFO", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "f"), "data", 0o644)
		u := &upper{writer: newWriter(io.Discard, opts()), beforeOpen: func(string) {
			must(t, os.Remove(filepath.Join(root, "f")))
			must(t, unix.Mkfifo(filepath.Join(root, "f"), 0o644))
		}}
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		defer unix.Close(fd)
		if err := u.walk(fd, "", 0); !errors.Is(err, errChanged) {
			t.Fatalf("error %v, want %v", err, errChanged)
		}
	})
	t.Run("file grows while copied", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "log"), "line\n", 0o644)
		r := &growingWriter{path: filepath.Join(root, "log")}
		_, err := FromUpperDir(root, r, opts())
		if !errors.Is(err, errChanged) {
			t.Fatalf("error %v, want %v", err, errChanged)
		}
	})
}

// growingWriter appends to path when the file's content passes through it: the file changes
// during the copy, as a process that was not paused would change it.
type growingWriter struct {
	path string
	done bool
}

func (g *growingWriter) Write(p []byte) (int, error) {
	if !g.done && bytes.Contains(p, []byte("line\n")) {
		g.done = true
		f, err := os.OpenFile(g.path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		_, _ = f.WriteString("more\n")
		_ = f.Close()
	}
	return len(p), nil
}

func captureVolumes(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	v, err := NewVolumes(&buf, opts())
	must(t, err)
	if err := v.Add("data", dir); err != nil {
		return buf.Bytes(), err
	}
	must(t, v.Close())
	return buf.Bytes(), nil
}

// TestVolumesLayer: a volume is written under .paddock/volumes/<name>/, after an opaque
// .paddock (so nothing the sandbox put at that path in its root filesystem survives), with its
// root's mode; hard links point inside the prefix, symlinks are kept as written.
func TestVolumesLayer(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a/file"), "x", 0o640)
	must(t, os.Link(filepath.Join(root, "a/file"), filepath.Join(root, "hard")))
	must(t, os.Symlink("/etc/shadow", filepath.Join(root, "out")))
	must(t, os.Chmod(root, 0o751))
	b, err := captureVolumes(t, root)
	must(t, err)
	got := readLayer(t, b)
	for i := range got {
		got[i].UID, got[i].GID = 0, 0
	}
	want := []entry{
		{Name: ".paddock/", Type: tar.TypeDir, Mode: 0o755},
		{Name: ".paddock/.wh..wh..opq", Type: tar.TypeReg, Mode: 0o600},
		{Name: ".paddock/volumes/", Type: tar.TypeDir, Mode: 0o755},
		{Name: ".paddock/volumes/data/", Type: tar.TypeDir, Mode: 0o751},
		{Name: ".paddock/volumes/data/a/", Type: tar.TypeDir, Mode: 0o755},
		{Name: ".paddock/volumes/data/a/file", Type: tar.TypeReg, Mode: 0o640, Content: "x"},
		{Name: ".paddock/volumes/data/hard", Type: tar.TypeLink, Mode: 0o640, Link: ".paddock/volumes/data/a/file"},
		{Name: ".paddock/volumes/data/out", Type: tar.TypeSymlink, Mode: 0o777, Link: "/etc/shadow"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
}

// TestVolumesRefuse: in a volume a character device 0:0 is a device like any other (no
// deletion can be smuggled in), and the upper directory's rules hold (names, budget, devices).
func TestVolumesRefuse(t *testing.T) {
	for name, tc := range map[string]struct {
		root bool
		make func(t *testing.T, root string)
		want string
	}{
		"whiteout device": {root: true, make: func(t *testing.T, root string) {
			must(t, unix.Mknod(filepath.Join(root, "passwd"), unix.S_IFCHR|0o600, 0))
		}, want: "/passwd: a device node (0:0)"},
		"block device": {root: true, make: func(t *testing.T, root string) {
			must(t, unix.Mknod(filepath.Join(root, "sda"), unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))))
		}, want: "/sda: a block device"},
		"whiteout-looking name": {make: func(t *testing.T, root string) {
			write(t, filepath.Join(root, ".wh..wh..opq"), "x", 0o644)
		}, want: `names starting with ".wh."`},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.root {
				needRoot(t)
			}
			root := t.TempDir()
			tc.make(t, root)
			if _, err := captureVolumes(t, root); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if err := (&Volumes{w: newWriter(io.Discard, opts())}).Add("..", t.TempDir()); err == nil {
		t.Error("a volume named .. was accepted")
	}
}

// TestVolumesIgnoreOverlayAttributes: overlay attributes the sandbox sets on its own files in a
// volume mean nothing there (user.overlay.opaque would otherwise hide the layers below).
func TestVolumesIgnoreOverlayAttributes(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	if err := unix.Setxattr(filepath.Join(root, "d"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	b, err := captureVolumes(t, root)
	must(t, err)
	for _, e := range readLayer(t, b) {
		if strings.HasPrefix(e.Name, ".paddock/volumes/") && strings.Contains(e.Name, ".wh.") {
			t.Errorf("volume layer holds whiteout %s", e.Name)
		}
	}
}
