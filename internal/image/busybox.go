package image

import (
	"fmt"
	"os/exec"
	"path"
	"strings"
)

// BusyboxTree lays out a shell image from the static busybox binary at binary (Debian's
// busybox-static installs it as /bin/busybox): the binary at /bin/busybox and one symlink per
// applet at the applet's usual path. Ask the binary itself for its applets, so the tree matches
// the binary.
func BusyboxTree(binary string) (*Tree, error) {
	out, err := exec.Command(binary, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("list applets of %s: %w (install it with: apt-get install -y busybox-static)", binary, err)
	}
	return busyboxTree(binary, strings.Fields(string(out))), nil
}

func busyboxTree(binary string, applets []string) *Tree {
	t := NewTree().AddFile("/bin/busybox", binary, 0o755)
	for _, a := range applets {
		// The list names the binary itself; a symlink there would replace it with a link to itself.
		if path.Base(a) == "busybox" {
			continue
		}
		t.AddSymlink("/"+a, "/bin/busybox")
	}
	return t
}
