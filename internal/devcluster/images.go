package devcluster

import (
	"context"
	"fmt"

	"github.com/paddock-dev/paddock/internal/image"
)

// busyboxBinary is where Debian's busybox-static installs the static shell.
const busyboxBinary = "/bin/busybox"

// bashBinary is where Debian's bash-static installs a bash with no library dependencies.
const bashBinary = "/bin/bash-static"

// pushImages builds the pause and busybox images and pushes them to the registry. Both are
// reproducible, so a second push is a manifest check and nothing else.
func (cl *cluster) pushImages(ctx context.Context) (string, bool, error) {
	pause, err := image.FromBinary(cl.bin.Pause, "/pause")
	if err != nil {
		return "", false, err
	}
	tree, err := image.BusyboxTree(busyboxBinary)
	if err != nil {
		return "", false, err
	}
	shell, err := image.FromTree(tree, image.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	if err != nil {
		return "", false, err
	}
	p, err := image.Push(ctx, pause, cl.cfg.PauseImage())
	if err != nil {
		return "", false, fmt.Errorf("push the pause image: %w", err)
	}
	b, err := image.Push(ctx, shell, cl.cfg.BusyboxImage())
	if err != nil {
		return "", false, fmt.Errorf("push the busybox image: %w", err)
	}
	return cl.cfg.PauseImage() + ", " + cl.cfg.BusyboxImage(), p.Uploaded || b.Uploaded, nil
}
