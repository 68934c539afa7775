package restore

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string, mode uint32) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o600))
	must(t, unix.Chmod(p, mode))
}

// node is what a test compares of one file of a tree.
type node struct {
	Mode     os.FileMode
	UID, GID uint32
	MTime    time.Time
	Content  string
	Link     string
	// HardLink is the first path (in walk order) sharing this file's inode.
	HardLink string
}

// treeOf lists dir's tree without following links; the root's own mode, owner and time are
// listed as ".".
func treeOf(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	inodes := map[uint64]string{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n := node{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}
		switch {
		case fi.Mode().IsRegular():
			if first, ok := inodes[st.Ino]; ok {
				n.HardLink = first
			} else {
				inodes[st.Ino] = rel
			}
			b, err := os.ReadFile(p)
			must(t, err)
			n.Content = string(b)
			n.MTime = fi.ModTime()
		case fi.Mode()&fs.ModeSymlink != 0:
			n.Link, err = os.Readlink(p)
			must(t, err)
			n.MTime = fi.ModTime()
		default:
			n.MTime = fi.ModTime()
		}
		out[rel] = n
		return nil
	}))
	return out
}

// volumeTree writes what a sandbox might leave in a volume: nested files with owners and modes
// (set-user-ID included), a symlink pointing out of the volume, a hard link, a FIFO, an empty
// directory, and a root with a mode and owner of its own.
func volumeTree(t *testing.T, root string) {
	t.Helper()
	write(t, filepath.Join(root, "notes.txt"), "kept\n", 0o640)
	write(t, filepath.Join(root, "project/src/main.py"), "print('hi')\n", 0o755)
	write(t, filepath.Join(root, "project/bin/tool"), "#!/bin/sh\n", 0o4755)
	must(t, os.Symlink("../../../../etc/shadow", filepath.Join(root, "project/escape")))
	must(t, os.Symlink("src/main.py", filepath.Join(root, "project/main")))
	must(t, os.Link(filepath.Join(root, "notes.txt"), filepath.Join(root, "project/notes.hard")))
	must(t, unix.Mkfifo(filepath.Join(root, "project/pipe"), 0o620))
	must(t, os.MkdirAll(filepath.Join(root, "empty"), 0o700))
	if os.Geteuid() == 0 {
		must(t, os.Lchown(filepath.Join(root, "notes.txt"), 1000, 1000))
		must(t, os.Lchown(filepath.Join(root, "project/main"), 1001, 1002))
		must(t, unix.Chmod(filepath.Join(root, "project/bin/tool"), 0o4755))
		must(t, os.Lchown(root, 1000, 1000))
	}
	must(t, unix.Chmod(root, 0o750))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(root, "project/src"), old, old))
	must(t, os.Chtimes(root, old, old))
}

// captureVolume writes dir as volume "data" of a volume layer and unpacks that layer into a new
// image root, as a node does when it pulls the snapshot image; it returns the image root.
func captureVolume(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	v, err := layer.NewVolumes(&buf, layer.Options{Limits: layer.DefaultLimits()})
	must(t, err)
	must(t, v.Add("data", dir))
	must(t, v.Close())
	img := t.TempDir()
	unpack(t, buf.Bytes(), img)
	return img
}

// unpack extracts a layer the way the tests need: whiteouts are markers only.
func unpack(t *testing.T, b []byte, root string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var dirs []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		if strings.HasPrefix(filepath.Base(h.Name), ".wh.") {
			continue
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			must(t, os.MkdirAll(p, 0o700))
			dirs = append(dirs, h)
			continue
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			must(t, err)
			_, err = io.Copy(f, tr)
			must(t, err)
			must(t, f.Close())
		case tar.TypeSymlink:
			must(t, os.Symlink(h.Linkname, p))
		case tar.TypeLink:
			must(t, os.Link(filepath.Join(root, h.Linkname), p))
			continue
		case tar.TypeFifo:
			must(t, unix.Mkfifo(p, 0o600))
		default:
			t.Fatalf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
		must(t, os.Lchown(p, h.Uid, h.Gid))
		if h.Typeflag != tar.TypeSymlink {
			must(t, unix.Chmod(p, uint32(h.Mode)))
		}
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{unix.NsecToTimespec(h.ModTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW))
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		h := dirs[i]
		p := filepath.Join(root, h.Name)
		must(t, os.Lchown(p, h.Uid, h.Gid))
		must(t, unix.Chmod(p, uint32(h.Mode)))
		must(t, os.Chtimes(p, h.ModTime, h.ModTime))
	}
}

// TestRoundTrip: a volume captured into a layer and restored into a fresh volume is the same
// tree: contents, owners, modes (set-user-ID kept), times, symlinks (not followed, the one
// pointing out of the volume included), hard links, FIFOs, empty directories and the root's
// own mode and owner. Nothing of the restore's staging is left.
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	volumeTree(t, src)
	// Both are ext4 volumes, with a lost+found of their own.
	must(t, os.Mkdir(filepath.Join(src, lostFound), 0o700))
	write(t, filepath.Join(src, lostFound, "#1234"), "found", 0o600)
	img := captureVolume(t, src)
	must(t, os.Remove(filepath.Join(src, lostFound, "#1234")))
	dst := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dst, lostFound), 0o700))
	got, err := Volume(filepath.Join(img, layer.VolumesDir, "data"), dst)
	must(t, err)
	if got != Restored {
		t.Fatalf("outcome %q, want %q", got, Restored)
	}
	want := treeOf(t, src)
	// The new volume keeps its own lost+found.
	want[lostFound] = treeOf(t, dst)[lostFound]
	if diff := cmp.Diff(want, treeOf(t, dst)); diff != "" {
		t.Errorf("restored tree differs from the captured one (-captured +restored):\n%s", diff)
	}
}

// TestDeletionsComeBack: a file the sandbox deleted from its volume before the capture is not in
// the restored volume (the capture is the whole tree, and only an empty volume is restored).
func TestDeletionsComeBack(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "keep"), "k", 0o644)
	write(t, filepath.Join(src, "gone"), "g", 0o644)
	must(t, os.Remove(filepath.Join(src, "gone")))
	img := captureVolume(t, src)
	dst := t.TempDir()
	_, err := Volume(filepath.Join(img, layer.VolumesDir, "data"), dst)
	must(t, err)
	if _, err := os.Lstat(filepath.Join(dst, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("deleted file is back: %v", err)
	}
}

// TestVolumeWithDataIsKept: a volume holding anything (a resumed Sandbox's PVC) is not touched,
// even when it holds only a file the capture also has, and running the restore again on a
// restored volume changes nothing.
func TestVolumeWithDataIsKept(t *testing.T) {
	src := t.TempDir()
	volumeTree(t, src)
	img := captureVolume(t, src)
	from := filepath.Join(img, layer.VolumesDir, "data")

	dst := t.TempDir()
	write(t, filepath.Join(dst, "notes.txt"), "newer\n", 0o600)
	before := treeOf(t, dst)
	got, err := Volume(from, dst)
	must(t, err)
	if got != Kept {
		t.Fatalf("outcome %q, want %q", got, Kept)
	}
	if diff := cmp.Diff(before, treeOf(t, dst)); diff != "" {
		t.Errorf("a volume with data changed (-before +after):\n%s", diff)
	}

	dst = t.TempDir()
	_, err = Volume(from, dst)
	must(t, err)
	must(t, os.Remove(filepath.Join(dst, "notes.txt"))) // the sandbox deletes a file, then resumes
	before = treeOf(t, dst)
	if got, err := Volume(from, dst); err != nil || got != Kept {
		t.Fatalf("second restore: %q, %v; want %q", got, err, Kept)
	}
	if diff := cmp.Diff(before, treeOf(t, dst)); diff != "" {
		t.Errorf("a second restore changed the volume (-before +after):\n%s", diff)
	}
}

// TestInterruptedRestore: a restore killed while copying starts over; one killed while moving
// the complete copy into place finishes the move. Either way the result is the captured tree.
func TestInterruptedRestore(t *testing.T) {
	src := t.TempDir()
	volumeTree(t, src)
	img := captureVolume(t, src)
	from := filepath.Join(img, layer.VolumesDir, "data")

	t.Run("while copying", func(t *testing.T) {
		dst := t.TempDir()
		write(t, filepath.Join(dst, staging, "notes.txt"), "half", 0o600)
		must(t, os.Symlink("/etc", filepath.Join(dst, staging, "project")))
		if got, err := Volume(from, dst); err != nil || got != Restored {
			t.Fatalf("restore: %q, %v; want %q", got, err, Restored)
		}
		if diff := cmp.Diff(treeOf(t, src), treeOf(t, dst)); diff != "" {
			t.Errorf("(-captured +restored):\n%s", diff)
		}
	})
	t.Run("while moving", func(t *testing.T) {
		dst := t.TempDir()
		sfd, err := openDir(unix.AT_FDCWD, from)
		must(t, err)
		defer unix.Close(sfd)
		dfd, err := openDir(unix.AT_FDCWD, dst)
		must(t, err)
		defer unix.Close(dfd)
		must(t, copyToStaging(sfd, dfd))
		// Half the entries were moved when the init container was killed.
		must(t, os.Rename(filepath.Join(dst, done, "empty"), filepath.Join(dst, "empty")))
		if got, err := Volume(from, dst); err != nil || got != Restored {
			t.Fatalf("restore: %q, %v; want %q", got, err, Restored)
		}
		if diff := cmp.Diff(treeOf(t, src), treeOf(t, dst)); diff != "" {
			t.Errorf("(-captured +restored):\n%s", diff)
		}
	})
}

// TestVolumeRootIsLink: neither the captured volume nor the target may be a symlink.
func TestVolumeRootIsLink(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Symlink(t.TempDir(), filepath.Join(dir, "link")))
	if _, err := Volume(filepath.Join(dir, "link"), t.TempDir()); err == nil {
		t.Error("followed a symlink as the captured volume")
	}
	if _, err := Volume(t.TempDir(), filepath.Join(dir, "link")); err == nil {
		t.Error("followed a symlink as the volume")
	}
}

// TestReservedNamesFromTheSandbox: code in a sandbox may itself create the restore's reserved
// names in its volume before it is suspended. A link named like them is its own data (the
// volume is kept, nothing followed); a directory named like the finished copy is moved into the
// root without overwriting anything there; neither makes the restore fail, which would keep the
// Sandbox from starting.
func TestReservedNamesFromTheSandbox(t *testing.T) {
	src := t.TempDir()
	volumeTree(t, src)
	from := filepath.Join(captureVolume(t, src), layer.VolumesDir, "data")
	for _, name := range []string{staging, done} {
		t.Run(name+" link", func(t *testing.T) {
			dst, outside := t.TempDir(), t.TempDir()
			write(t, filepath.Join(outside, "x"), "outside", 0o600)
			must(t, os.Symlink(outside, filepath.Join(dst, name)))
			before, beforeOutside := treeOf(t, dst), treeOf(t, outside)
			if got, err := Volume(from, dst); err != nil || got != Kept {
				t.Fatalf("restore: %q, %v; want %q", got, err, Kept)
			}
			if d := cmp.Diff(before, treeOf(t, dst)); d != "" {
				t.Errorf("volume changed:\n%s", d)
			}
			if d := cmp.Diff(beforeOutside, treeOf(t, outside)); d != "" {
				t.Errorf("the link's target changed:\n%s", d)
			}
		})
	}
	t.Run(done+" directory", func(t *testing.T) {
		dst := t.TempDir()
		write(t, filepath.Join(dst, "notes.txt"), "mine", 0o600)
		write(t, filepath.Join(dst, done, "notes.txt"), "theirs", 0o600)
		write(t, filepath.Join(dst, done, "extra"), "e", 0o600)
		if _, err := Volume(from, dst); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "notes.txt")); string(b) != "mine" {
			t.Errorf("notes.txt is %q, want the volume's own", b)
		}
		if _, err := os.Lstat(filepath.Join(dst, done)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left: %v", done, err)
		}
	})
}
