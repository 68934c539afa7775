package devcluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Packages are the Debian packages the real node needs.
// busybox-static and bash-static go into the sandbox image; mmdebstrap builds env-base.
var Packages = []string{"containerd", "runc", "containernetworking-plugins", "busybox-static", "bash-static", "mmdebstrap", "iproute2", "iptables", "ipset"}

func requireRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("paddock dev needs root: it runs containerd and the kubelet and creates network interfaces; run it with sudo")
	}
	return nil
}

// missingPackages returns the packages dpkg does not report as installed.
func missingPackages(pkgs []string) []string {
	var missing []string
	for _, p := range pkgs {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	return missing
}

// installCommand is the command that installs pkgs, shown when the tool may not run it itself.
func installCommand(pkgs []string) string {
	return "apt-get update && apt-get install -y " + strings.Join(pkgs, " ")
}

// ensurePackages installs missing packages with apt-get when install is set, and otherwise
// fails with the command that fixes it.
func ensurePackages(install bool) error {
	missing := missingPackages(Packages)
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("missing Debian packages %s; install them with: %s", strings.Join(missing, ", "), installCommand(missing))
	}
	run := func(args ...string) error {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s\ninstall them by hand with: %s", args[0], err, out, installCommand(missing))
		}
		return nil
	}
	if err := run("update", "-qq"); err != nil {
		return err
	}
	return run(append([]string{"install", "-y", "-qq"}, missing...)...)
}

// portInUse reports whether addr (host:port) is taken for TCP, or for UDP too when udp is set.
func portInUse(addr string, udp bool) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("TCP %s is in use by another process (see: ss -ltnp 'sport = :%s')", addr, portOf(addr))
	}
	l.Close()
	if udp {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("UDP %s is in use by another process (see: ss -lunp 'sport = :%s')", addr, portOf(addr))
		}
		pc.Close()
	}
	return nil
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// ensureNodeInterface gives the node its own address. A dummy interface is the natural home;
// kernels built without the dummy driver get a bridge with no ports, which behaves the same
// for local traffic.
func ensureNodeInterface(ip netip.Addr) error {
	if _, err := net.InterfaceByName(nodeInterface); err != nil {
		if out, err := exec.Command("ip", "link", "add", nodeInterface, "type", "dummy").CombinedOutput(); err != nil {
			if out2, err2 := exec.Command("ip", "link", "add", nodeInterface, "type", "bridge").CombinedOutput(); err2 != nil {
				return fmt.Errorf("create interface %s: dummy: %s; bridge: %s", nodeInterface, strings.TrimSpace(string(out)), strings.TrimSpace(string(out2)))
			}
		}
	}
	addr := ip.String() + "/32"
	if out, err := exec.Command("ip", "addr", "replace", addr, "dev", nodeInterface).CombinedOutput(); err != nil {
		return fmt.Errorf("add %s to %s: %s", addr, nodeInterface, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "link", "set", nodeInterface, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("bring %s up: %s", nodeInterface, strings.TrimSpace(string(out)))
	}
	return nil
}

// deleteInterfaces removes the node interface and the CNI bridge (with it every veth on it).
func deleteInterfaces() error {
	var errs []error
	for _, name := range []string{bridgeInterface, nodeInterface} {
		if _, err := net.InterfaceByName(name); err != nil {
			continue
		}
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete interface %s: %s", name, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, deepest first, from /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	return mounts, s.Err()
}

// unescapeMountPath decodes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMountPath(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			var v int
			if _, err := fmt.Sscanf(p[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// unmountUnder detaches every mount below dir (tmpfs of pod volumes, sandbox /dev/shm) that the
// kubelet and containerd left when they were stopped before their pods.
func unmountUnder(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// containerdSnapshotter picks the snapshotter for containerd's root dir: overlayfs, whose
// containers share their image's unpacked layers, where dir's filesystem can hold an overlay's
// upper directory; native, which copies the whole image for every container, elsewhere. env-base
// unpacks to 700 MB: a pool of twenty copies would fill a disk.
func containerdSnapshotter(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	probe, err := os.MkdirTemp(dir, ".overlay-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(probe)
	p := func(name string) string { return filepath.Join(probe, name) }
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(p(d), 0o755); err != nil {
			return "", err
		}
	}
	opts := "lowerdir=" + p("lower") + ",upperdir=" + p("upper") + ",workdir=" + p("work")
	if err := unix.Mount("overlay", p("merged"), "overlay", 0, opts); err != nil {
		return "native", nil
	}
	if err := unix.Unmount(p("merged"), 0); err != nil {
		return "", fmt.Errorf("unmount the overlay probe %s: %w", p("merged"), err)
	}
	return "overlayfs", nil
}
