package capture

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// runscUpper streams `runsc tar rootfs-upper` of o.ContainerID through layer.FromOverlayTar
// into out: gVisor keeps a container's writes inside the sandbox (its overlay's upper layer is
// sandbox memory or an opaque filestore), so only runsc can list them. The tar is checked as it
// arrives (names, links, the byte budget); a tar that breaks a rule stops runsc at once, so a
// sandbox cannot make the capture write more than the budget anywhere.
func runscUpper(ctx context.Context, o Options, out io.Writer) error {
	root := o.RunscRoot
	if root == "" {
		root = DefaultRunscRoot
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Runsc, "--root="+root, "tar", "rootfs-upper", o.ContainerID)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", o.Runsc, err)
	}
	_, convErr := layer.FromOverlayTar(stdout, out, o.Layer)
	if convErr != nil {
		cancel() // stop runsc: what it still writes is not wanted
	}
	// Drain what is left so runsc never blocks on a full pipe before it exits.
	_, _ = io.Copy(io.Discard, stdout)
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
