package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/standin"
)

// DownOptions tune `paddock dev down`.
type DownOptions struct {
	// KeepState keeps the state dir (etcd data, images, volumes) for the next `up`.
	KeepState bool
	Out       io.Writer
}

// Down stops every component `up` started, removes the pods' sandboxes, mounts and the
// cluster's interfaces, and unless KeepState removes the state dir. It goes on past errors so
// that one stuck component does not leave the others running, and reports them all.
func Down(ctx context.Context, cfg Config, opts DownOptions) error {
	if err := requireRoot(); err != nil {
		return err
	}
	cl := &cluster{cfg: cfg, out: opts.Out}
	var errs []error
	do := func(name string, fn func() error) {
		t := time.Now()
		if err := fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			cl.printf("  x %-24s %v\n", name, err)
			return
		}
		cl.printf("  ✓ %-24s (%s)\n", name, since(t))
	}
	stop := func(name string, grace time.Duration) {
		do("stop "+name, func() error { return cfg.process(name).stop(ctx, grace) })
	}
	stop(compEgress, 10*time.Second)
	stop(compKWOK, 5*time.Second)
	stop(compProvisioner, 5*time.Second)
	stop(compNetpol, 10*time.Second)
	// The kubelet goes first so it does not restart the sandboxes removed next.
	stop(compKubelet, 10*time.Second)
	do("remove pod sandboxes", func() error { return removeSandboxes(ctx, cfg) })
	stop(compContainerd, 10*time.Second)
	do("stop leftover shims", func() error { return killShims(ctx, cfg) })
	do("remove gVisor's runtime state", func() error { return removeRunscState(runscStateRoot) })
	for _, name := range []string{compCoreDNS, compInternet, compRegistry, compScheduler, compControllers, compAPIServer, compEtcd} {
		stop(name, 10*time.Second)
	}
	do("unmount", func() error { return unmountUnder(cfg.StateDir) })
	if ownsHost(cfg) {
		do("remove interfaces", deleteInterfaces)
		do("remove the internet stand-in's link", standin.Detach)
		do("remove the egress guard's ip rules", removeGuard)
		do("remove kubelet iptables chains", removeKubeletChains)
		do("remove kube-router's iptables chains and ipsets", removeNetpolRules)
		do("remove the kubelet's cgroups", removeKubeletCgroupRoot)
		do("remove the control plane's cgroup", removeControlPlaneCgroup)
		do("remove paddock-egress's iptables chains", removeEgressRules)
		do("release the host", func() error { return releaseHost(cfg) })
	} else {
		cl.printf("  - interfaces and iptables chains belong to another dev cluster; left alone\n")
	}
	do("remove container log links", func() error { return removeLogLinks(cfg.StateDir) })
	if !opts.KeepState {
		do("remove "+cfg.StateDir, func() error { return os.RemoveAll(cfg.StateDir) })
		if ownsHost(cfg) {
			// gVisor memory checkpoints of this cluster's sandboxes: the shim reads them only
			// from this fixed node directory, outside the state dir.
			do("remove "+snapshotsv1alpha1.MemoryImageDir, func() error {
				if err := os.RemoveAll(snapshotsv1alpha1.MemoryImageDir); err != nil {
					return err
				}
				// Its parent too, when nothing else is in it (the kubelet makes both for a hostPath).
				_ = os.Remove(filepath.Dir(snapshotsv1alpha1.MemoryImageDir))
				return nil
			})
		}
	}
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every pod sandbox through the CRI, which is what tears down
// each pod's network namespace, veth, IP lease and /dev/shm mount, and ends its shim.
func removeSandboxes(ctx context.Context, cfg Config) error {
	if cfg.process(compContainerd).pid() == 0 || unixSocketServes(cfg.ContainerdSocket()) != nil {
		return nil
	}
	conn, err := grpc.NewClient("unix://"+cfg.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox of pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox of pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
		}
	}
	return errors.Join(errs...)
}

// killShims ends containerd shims of this cluster that outlived containerd (they are started
// detached on purpose), with the containers under them. They are recognised by the containerd
// address on their command line.
func killShims(ctx context.Context, cfg Config) error {
	pids, err := processesWithArg(cfg.ContainerdSocket())
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		if err := killTree(ctx, pid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processesWithArg returns the pids whose command line has an argument equal to arg.
func processesWithArg(arg string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// killTree kills pid and all its descendants.
func killTree(ctx context.Context, pid int) error {
	children := descendants(pid)
	for _, p := range append([]int{pid}, children...) {
		proc, err := os.FindProcess(p)
		if err == nil {
			_ = proc.Kill()
		}
	}
	for _, p := range append([]int{pid}, children...) {
		if !waitGone(ctx, p, 5*time.Second) {
			return fmt.Errorf("process %d survived SIGKILL", p)
		}
	}
	return nil
}

func descendants(root int) []int {
	parent := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		parent[ppid] = append(parent[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range parent[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// removeLogLinks removes the links the kubelet keeps in /var/log/containers (a path it does not
// let us move) that point into the state dir.
func removeLogLinks(stateDir string) error {
	const dir = "/var/log/containers"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, stateDir+"/") {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
