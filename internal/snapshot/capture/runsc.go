package capture

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// runscUpper streams `runsc tar rootfs-upper` of o.ContainerID through layer.FromOverlayTar
// into out: gVisor keeps a container's writes inside the sandbox (its overlay's upper layer is
// sandbox memory or an opaque filestore), so only runsc can list them. runsc prints a status
// line on its stdout, so the tar goes through a pipe it opens as --file (/proc/self/fd/3), and
// it is checked as it arrives (names, links, the byte budget): nothing of it touches the disk.
// A tar that breaks a rule fails the capture and the pipe is closed at once (as when ctx ends):
// the sandbox, which writes the tar while holding its filesystem's read lock, gets EPIPE on its
// next write and stops, rather than being read to the end (100 GiB for a sparse file).
func runscUpper(ctx context.Context, o Options, out io.Writer) error {
	root := o.RunscRoot
	if root == "" {
		root = DefaultRunscRoot
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.CommandContext(ctx, o.Runsc, "--root="+root, "tar", "rootfs-upper", "--file=/proc/self/fd/3", o.ContainerID)
	cmd.ExtraFiles = []*os.File{w}
	var stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stderr, max: 4096}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("running %s: %w", o.Runsc, err)
	}
	// Only runsc and the sandbox hold the write end now: EOF comes when both are done.
	w.Close()
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	_, convErr := layer.FromOverlayTar(r, out, o.Layer)
	if convErr == nil {
		_, _ = io.Copy(io.Discard, r) // what follows the tar's end, so that runsc ends cleanly
	}
	r.Close()
	waitErr := cmd.Wait()
	if convErr != nil {
		return convErr
	}
	if waitErr != nil {
		return fmt.Errorf("runsc tar rootfs-upper %s: %w: %s", o.ContainerID, waitErr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Resume resumes a container a capture may have left paused (the capture Pod was killed with
// SIGKILL between its pause and its resume). A container that is not paused, or that is gone,
// is not an error: the resume Pod runs whenever a capture ended without a result, whether or
// not it paused anything.
func Resume(ctx context.Context, rt Runtime, id string) error {
	paused, err := rt.Paused(ctx, id)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the state of container %s: %w", id, err)
	case !paused:
		return nil
	}
	if err := rt.Resume(ctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("resuming container %s: %w", id, err)
	}
	return nil
}

// isNotFound reports containerd's answer for a container or task that does not exist.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
