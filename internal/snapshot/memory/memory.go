// Package memory writes and removes gVisor checkpoint images on a node, for the suspend that
// keeps memory (docs/design/snapshots.md, "Memory"). It runs as root in the controller's
// privileged node Pods (`paddock-snapshot checkpoint` and `paddock-snapshot forget`), with no
// API access: its flags, written by the controller, say everything.
//
// An image is the directory <Dir>/<Name>, root-only (0700), with runsc's files and a file
// "namespace" naming the only namespace whose Pods Paddock's shim restores it into. Dir itself is
// made root-only too.
package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// NamespaceFile is the file of an image that names its namespace; the shim compares it with the
// restoring Pod's.
const NamespaceFile = "namespace"

// namePattern is what the shim accepts as an image name: one path element.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// CheckpointOptions say what to checkpoint and where.
type CheckpointOptions struct {
	// Runsc is the node's runsc binary and RunscRoot its state directory for containerd's CRI
	// namespace (the shim's --root).
	Runsc, RunscRoot string
	// ContainerID is any container of the sandbox to checkpoint: runsc saves the whole sandbox.
	ContainerID string
	// Dir is the node's image directory; Name the image.
	Dir, Name string
	// Namespace is the Kubernetes namespace the image may be restored into.
	Namespace string
	// MaxBytes caps the image: a larger one is removed and the checkpoint fails. The node must
	// also have that much free in Dir before it starts.
	MaxBytes int64
}

// Result is what a checkpoint reports (one line on stdout and in the termination message).
type Result struct {
	Bytes   int64
	Elapsed time.Duration
}

// String is the result line the controller shows in the Sandbox's condition.
func (r Result) String() string {
	return fmt.Sprintf("image of %d bytes written in %s", r.Bytes, r.Elapsed.Round(time.Millisecond))
}

// Checkpoint saves the sandbox of o.ContainerID into <Dir>/<Name> and leaves it running. Any
// failure removes what it wrote: an image is complete, or absent.
func Checkpoint(ctx context.Context, o CheckpointOptions) (Result, error) {
	start := time.Now()
	switch {
	case !namePattern.MatchString(o.Name):
		return Result{}, fmt.Errorf("--name=%q is not an image name (one path element of [a-z0-9.-])", o.Name)
	case o.ContainerID == "" || strings.ContainsAny(o.ContainerID, "/ "):
		return Result{}, fmt.Errorf("--container-id=%q: want a containerd container ID", o.ContainerID)
	case o.Namespace == "":
		return Result{}, errors.New("--namespace is required: the shim restores an image only into its namespace")
	case o.Runsc == "":
		return Result{}, errors.New("--runsc is required: the node's runsc binary")
	case o.MaxBytes <= 0:
		return Result{}, fmt.Errorf("--max-bytes=%d: want a positive cap", o.MaxBytes)
	}
	if err := rootOnlyDir(o.Dir); err != nil {
		return Result{}, err
	}
	if free, err := freeBytes(o.Dir); err != nil {
		return Result{}, err
	} else if free < o.MaxBytes {
		return Result{}, fmt.Errorf("%s has %d bytes free, fewer than this checkpoint's cap of %d bytes; free space on the node or lower the Pod's memory limit", o.Dir, free, o.MaxBytes)
	}
	img := filepath.Join(o.Dir, o.Name)
	// A checkpoint killed before it finished may have left a partial image of the same Pod.
	if err := os.RemoveAll(img); err != nil {
		return Result{}, fmt.Errorf("removing the earlier partial image %s: %w", img, err)
	}
	if err := os.Mkdir(img, 0o700); err != nil {
		return Result{}, fmt.Errorf("making the image directory: %w", err)
	}
	res, err := checkpoint(ctx, o, img)
	if err != nil {
		if rmErr := os.RemoveAll(img); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("removing the failed image %s: %w", img, rmErr))
		}
		return Result{}, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func checkpoint(ctx context.Context, o CheckpointOptions, img string) (Result, error) {
	var stderr bytes.Buffer
	args := []string{"checkpoint", "--leave-running", "--compression=none", "--image-path=" + img, o.ContainerID}
	if o.RunscRoot != "" {
		args = append([]string{"--root=" + o.RunscRoot}, args...)
	}
	cmd := exec.CommandContext(ctx, o.Runsc, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("runsc checkpoint of container %s: %w: %s", o.ContainerID, err, lastLines(stderr.String(), 5))
	}
	size, err := dirBytes(img)
	if err != nil {
		return Result{}, err
	}
	if size > o.MaxBytes {
		return Result{}, fmt.Errorf("the image is %d bytes, above this checkpoint's cap of %d bytes (the Pod's memory limit); it was removed", size, o.MaxBytes)
	}
	if err := os.WriteFile(filepath.Join(img, NamespaceFile), []byte(o.Namespace), 0o600); err != nil {
		return Result{}, fmt.Errorf("writing the image's namespace file: %w", err)
	}
	return Result{Bytes: size}, nil
}

// Forget removes the image <dir>/<name>; one that is not there is fine.
func Forget(dir, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("--name=%q is not an image name (one path element of [a-z0-9.-])", name)
	}
	if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("removing image %s: %w", name, err)
	}
	return nil
}

// rootOnlyDir makes dir (and its parents) and sets it to 0700; a symlink is refused.
func rootOnlyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the image directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink?); refusing to write images through it", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("making %s root-only: %w", dir, err)
	}
	return nil
}

func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("reading the free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil //nolint:gosec // block counts fit in int64
}

func dirBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the image %s: %w", dir, err)
	}
	return total, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
