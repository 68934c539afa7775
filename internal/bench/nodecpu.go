package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/procstat"
)

// NodeCPU is where a machine's CPU went in a window, read from /proc at its start and end: the
// harness runs on the cluster's node (`paddock dev up`'s), so a scenario's creates, the
// control plane, the container runtime and the sandboxes share the CPUs it reads.
type NodeCPU struct {
	// Seconds is the window; Busy the CPU time all CPUs spent outside idle and I/O wait in it
	// (/proc/stat), in core-seconds.
	Seconds float64 `json:"seconds"`
	Busy    float64 `json:"busyCoreSeconds"`
	// Components are core-seconds by component (the Component* names): each process's own CPU
	// time plus that of the children it reaped in the window, so that short-lived commands
	// (runsc's, the CNI plugins, iptables) count with the process that ran them. What exited
	// without a parent that stays (an orphan reaped by init) is only in Busy; a child that
	// started before the window and was reaped in it counts with all its CPU, so a component
	// may be a little over its share of Busy.
	Components map[string]float64 `json:"components"`
	// OtherCommands splits ComponentOther by command name (the harness itself, the dev
	// cluster's scheduler, controller manager, registry, ...).
	OtherCommands map[string]float64 `json:"otherCommands,omitempty"`
}

// The components NodeCPU reports. A process in a Pod's cgroup (the kubelet's kubepods) is
// Paddock's when its command is one of Paddock's binaries (the controller, the router with the
// E2B front door), and a sandbox member's otherwise: gVisor's Sentry and gofer (runsc's "exe"),
// or the member's own processes under runc.
const (
	ComponentAPIServer  = "kube-apiserver"
	ComponentEtcd       = "etcd"
	ComponentKubelet    = "kubelet"
	ComponentContainerd = "containerd and CNI plugins"
	ComponentShims      = "shims and runsc commands"
	ComponentNetpol     = "network policy (kube-router)"
	ComponentPaddock    = "Paddock's Pods (controller, router)"
	ComponentMembers    = "sandbox members"
	ComponentOther      = "other"
)

// nodeCPUComponents is the order in which reports list the components.
var nodeCPUComponents = []string{
	ComponentMembers, ComponentAPIServer, ComponentEtcd, ComponentPaddock, ComponentKubelet,
	ComponentContainerd, ComponentShims, ComponentNetpol, ComponentOther,
}

// procCPU is one process in a snapshot.
type procCPU struct {
	start        uint64 // start time in ticks since boot: a pid reused in the window is a new process
	component    string
	comm         string
	self, reaped float64 // seconds: utime+stime, and cutime+cstime
}

// cpuSnapshot is /proc at one instant.
type cpuSnapshot struct {
	at    time.Time
	busy  float64
	procs map[int]procCPU
}

// readCPUSnapshot reads the CPU times of the machine and of every process under procRoot
// (/proc). A process that exits while it is read is left out.
func readCPUSnapshot(procRoot string) (cpuSnapshot, error) {
	s := cpuSnapshot{at: time.Now(), procs: map[int]procCPU{}}
	busy, err := readBusy(filepath.Join(procRoot, "stat"))
	if err != nil {
		return s, err
	}
	s.busy = busy
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProcCPU(procRoot, pid)
		if err != nil {
			continue
		}
		s.procs[pid] = p
	}
	return s, nil
}

// readBusy returns the seconds all CPUs spent neither idle nor waiting for I/O, from the
// "cpu" line of /proc/stat.
func readBusy(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[0] != "cpu" {
			continue
		}
		var total float64
		for i, v := range fields[1:] {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: cpu field %d %q: %w", path, i+1, v, err)
			}
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			if i >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			total += n
		}
		return total / procstat.UserHZ, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no cpu line", path)
}

// readProcCPU reads one /proc/PID directory.
func readProcCPU(procRoot string, pid int) (procCPU, error) {
	st, err := procstat.Read(procRoot, pid)
	if err != nil {
		return procCPU{}, err
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return procCPU{}, err
	}
	name := strings.TrimSpace(string(comm))
	cgroup, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
	return procCPU{
		start: st.Start, comm: name, component: component(name, cpuCgroup(string(cgroup))),
		self: st.CPU().Seconds(), reaped: st.Reaped().Seconds(),
	}, nil
}

// cpuCgroup returns the process's cgroup in the CPU hierarchy (cgroup v1's cpu controller, or
// the unified hierarchy) from /proc/PID/cgroup.
func cpuCgroup(data string) string {
	unified := ""
	for line := range strings.SplitSeq(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return parts[2]
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	return unified
}

// paddockCommands are the comm names (at most 15 bytes) of Paddock's own Pods' processes.
var paddockCommands = []string{"paddock-control", "paddock-router"}

// component names the component a process belongs to, from its command name and CPU cgroup.
func component(comm, cgroup string) string {
	switch {
	case comm == "kube-apiserver":
		return ComponentAPIServer
	case comm == "etcd":
		return ComponentEtcd
	case strings.Contains(cgroup, "kubepods"):
		if slices.Contains(paddockCommands, comm) {
			return ComponentPaddock
		}
		return ComponentMembers
	case comm == "kubelet":
		return ComponentKubelet
	case comm == "containerd":
		return ComponentContainerd
	case strings.HasPrefix(comm, "containerd-shim"), strings.HasPrefix(comm, "runsc"):
		return ComponentShims
	case strings.HasPrefix(comm, "kube-router"):
		return ComponentNetpol
	}
	return ComponentOther
}

// nodeCPU is what went where from a to b: a process in both (same start time) counts what it
// and its reaped children used since a; one that started in the window counts all of it.
func nodeCPU(a, b cpuSnapshot) *NodeCPU {
	out := &NodeCPU{
		Seconds:       b.at.Sub(a.at).Seconds(),
		Busy:          b.busy - a.busy,
		Components:    map[string]float64{},
		OtherCommands: map[string]float64{},
	}
	for pid, p := range b.procs {
		used := p.self + p.reaped
		if before, ok := a.procs[pid]; ok && before.start == p.start {
			used -= before.self + before.reaped
		}
		if used > 0 {
			out.Components[p.component] += used
			if p.component == ComponentOther {
				out.OtherCommands[p.comm] += used
			}
		}
	}
	return out
}

// perUnit renders the report's components as milliseconds per unit (per create), in the
// report's order, the busy total first.
func (n *NodeCPU) perUnit(units int) string {
	if n == nil || units == 0 {
		return "–"
	}
	parts := []string{fmt.Sprintf("busy %.0f", n.Busy/float64(units)*1000)}
	for _, c := range nodeCPUComponents {
		if v := n.Components[c]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", c, v/float64(units)*1000))
		}
	}
	line := strings.Join(parts, ", ")
	if top := topCommands(n.OtherCommands, 3); len(top) > 0 {
		var names []string
		for _, c := range top {
			names = append(names, fmt.Sprintf("%s %.0f", c, n.OtherCommands[c]/float64(units)*1000))
		}
		line += " (other: " + strings.Join(names, ", ") + ")"
	}
	return line
}

// topCommands returns the k command names that used the most CPU, most first.
func topCommands(m map[string]float64, k int) []string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
	return names[:min(k, len(names))]
}
