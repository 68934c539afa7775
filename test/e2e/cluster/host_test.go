package cluster

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/devcluster"
)

// hostSnapshot is the part of the host a cluster touches: what `dev down` must restore.
type hostSnapshot struct {
	Interfaces []string
	Mounts     []string // mount points under the state dir or in the network-namespace dirs
	IPTables   string   // iptables-save and ip6tables-save without counters and comments
	// Routing is the policy rules and every routing table (ip rule, ip route show table all),
	// and IPSets the names of the ipsets (kube-router's, while it runs).
	Routing string
	IPSets  string
	// RunscState is what lies under gVisor's shim root (/run/containerd/runsc).
	RunscState []string
	// Cgroups are the kubelet's cgroup roots (devcluster.KubeletCgroupRoot) and the control
	// plane's cgroup (devcluster.ControlPlaneCgroup) in the hierarchies.
	Cgroups []string
}

func snapshotHost(stateDir string) (hostSnapshot, error) {
	var s hostSnapshot
	ifaces, err := net.Interfaces()
	if err != nil {
		return s, err
	}
	for _, i := range ifaces {
		s.Interfaces = append(s.Interfaces, i.Name)
	}
	sort.Strings(s.Interfaces)
	if s.Mounts, err = mountsWithin(stateDir, "/run/netns", "/var/run/netns", "/run/containerd/runsc"); err != nil {
		return s, err
	}
	s.IPTables = iptablesRules()
	s.Routing = command("ip", "-4", "rule", "show") + command("ip", "-4", "route", "show", "table", "all")
	s.IPSets = command("ipset", "list", "-n")
	for _, pattern := range []string{"/sys/fs/cgroup/*" + devcluster.KubeletCgroupRoot, "/sys/fs/cgroup" + devcluster.KubeletCgroupRoot,
		"/sys/fs/cgroup/*" + devcluster.ControlPlaneCgroup, "/sys/fs/cgroup" + devcluster.ControlPlaneCgroup} {
		found, _ := filepath.Glob(pattern)
		s.Cgroups = append(s.Cgroups, found...)
	}
	_ = filepath.WalkDir("/run/containerd/runsc", func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			s.RunscState = append(s.RunscState, p)
		}
		return nil
	})
	return s, nil
}

func mountsWithin(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		for _, d := range dirs {
			if fields[4] == d || strings.HasPrefix(fields[4], d+"/") {
				out = append(out, fields[4])
			}
		}
	}
	sort.Strings(out)
	return out, sc.Err()
}

// command returns what name prints, or nothing when it is missing or fails.
func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

func iptablesRules() string {
	var b strings.Builder
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			b.WriteString(counters.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String()
}

// processesMentioning lists "pid cmdline" of live processes whose command line contains s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, s) {
			out = append(out, e.Name()+" "+cmdline)
		}
	}
	return out
}
