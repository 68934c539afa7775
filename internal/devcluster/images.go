package devcluster

import (
	"context"
	"fmt"
	"os"

	"github.com/paddock-dev/paddock/internal/image"
)

// busyboxBinary is where Debian's busybox-static installs the static shell.
const busyboxBinary = "/bin/busybox"

// bashBinary is where Debian's bash-static installs a static bash: E2B's SDKs run every command
// as /bin/bash -l -c.
const bashBinary = "/bin/bash-static"

// Sandbox image accounts: E2B programs and upstream's sandboxd manifest run as uid 1000 with
// home /home/user and a writable /workspace, without any volume.
const (
	sandboxUID     = 1000
	sandboxPasswd  = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/bash\n"
	sandboxGroup   = "root:x:0:\nuser:x:1000:\n"
	sandboxPATH    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	sandboxdInPath = "/usr/local/bin/sandboxd"
)

// SandboxImageTree lays out the default sandbox image: busybox, /bin/bash, sandboxd, the
// accounts root and user (uid 1000, home /home/user, a link to /workspace), /workspace owned by
// uid 1000 and a sticky /tmp. busybox and bash are the static binaries of Debian's
// busybox-static and bash-static (empty: their install paths).
func SandboxImageTree(busybox, bash, sandboxd string) (*image.Tree, error) {
	if busybox == "" {
		busybox = busyboxBinary
	}
	if bash == "" {
		bash = bashBinary
	}
	if _, err := os.Stat(bash); err != nil {
		return nil, fmt.Errorf("the sandbox image needs a static bash: %w (install it with: apt-get install -y bash-static)", err)
	}
	tree, err := image.BusyboxTree(busybox)
	if err != nil {
		return nil, err
	}
	return tree.
		AddFile("/bin/bash", bash, 0o755).
		AddFile(sandboxdInPath, sandboxd, 0o755).
		AddData("/etc/passwd", []byte(sandboxPasswd), 0o644).
		AddData("/etc/group", []byte(sandboxGroup), 0o644).
		AddDir("/workspace", 0o755, sandboxUID, sandboxUID).
		AddDir("/home", 0o755, 0, 0).
		AddSymlink("/home/user", "/workspace").
		AddDir("/root", 0o700, 0, 0).
		AddDir("/tmp", 0o1777, 0, 0), nil
}

// SandboxImageConfig runs sandboxd; the user stays the pod's choice (root when unset).
var SandboxImageConfig = image.Config{Entrypoint: []string{sandboxdInPath}, Env: []string{sandboxPATH}}

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
