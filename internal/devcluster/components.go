package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/standin"
)

// Binaries are the executables the cluster runs.
type Binaries struct {
	K8sDir    string // kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubelet
	ToolsDir  string // kwok, kwok-stages/, coredns, kube-router-VERSION
	Paddock   string // this CLI, for the registry and provisioner subcommands
	Pause     string // the pause program, for the pause image
	GVisorDir string // runsc and containerd-shim-runsc-v1; empty without gVisor
}

// component is one background process of the cluster.
type component struct {
	name   string
	binary string
	args   []string
	// env is added to the environment it starts with.
	env []string
	// listens are the addresses it serves on, checked free before it starts.
	listens []listen
	// cloneflags start it in new namespaces (CLONE_NEWNET for the internet stand-in).
	cloneflags uintptr
	// attach, when set, is run with its pid after it starts, and again on an `up` that finds it
	// running; it must be idempotent.
	attach func(pid int) error
	// ready probes it once.
	ready   func(ctx context.Context) error
	timeout time.Duration
}

type listen struct {
	addr string
	udp  bool
}

// Component names, in start order. `down` stops them in reverse. The egress component comes
// last: `up` starts it after installing Paddock, whose namespace holds its CA.
const (
	compEtcd        = "etcd"
	compAPIServer   = "kube-apiserver"
	compControllers = "kube-controller-manager"
	compScheduler   = "kube-scheduler"
	compRegistry    = "registry"
	compInternet    = "internet"
	compContainerd  = "containerd"
	compCoreDNS     = "coredns"
	compKubelet     = "kubelet"
	compNetpol      = "netpol"
	compProvisioner = "provisioner"
	compKWOK        = "kwok"
	compEgress      = "egress"
)

var componentOrder = []string{
	compEtcd, compAPIServer, compControllers, compScheduler, compRegistry, compInternet,
	compContainerd, compCoreDNS, compKubelet, compNetpol, compProvisioner, compKWOK, compEgress,
}

// components describes every component. Probes that need the API use client, which is nil
// until the admin kubeconfig exists.
func (cl *cluster) components() map[string]component {
	c, b := cl.cfg, cl.bin
	node := func(port int) string { return hostPort(c.NodeIP, port) }
	stages, _ := filepath.Glob(filepath.Join(b.ToolsDir, "kwok-stages", "*.yaml"))
	sort.Strings(stages)
	list := []component{
		{
			name: compEtcd, binary: filepath.Join(b.K8sDir, "etcd"), args: etcdArgs(c),
			listens: []listen{{addr: loopback(c.Ports.EtcdClient)}, {addr: loopback(c.Ports.EtcdPeer)}},
			attach:  joinControlPlaneCgroup,
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "http://"+loopback(c.Ports.EtcdClient)+"/health", "")
			},
			timeout: 30 * time.Second,
		},
		{
			name: compAPIServer, binary: filepath.Join(b.K8sDir, "kube-apiserver"), args: apiServerArgs(c),
			listens: []listen{{addr: node(c.Ports.APIServer)}},
			attach:  joinControlPlaneCgroup,
			ready: func(ctx context.Context) error {
				return httpOK(ctx, c.APIServerURL()+"/readyz", cl.tokens.Admin)
			},
			timeout: 90 * time.Second,
		},
		{
			name: compControllers, binary: filepath.Join(b.K8sDir, "kube-controller-manager"), args: controllerManagerArgs(c),
			listens: []listen{{addr: loopback(c.Ports.ControllerManager)}},
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "https://"+loopback(c.Ports.ControllerManager)+"/healthz", "")
			},
			timeout: 60 * time.Second,
		},
		{
			name: compScheduler, binary: filepath.Join(b.K8sDir, "kube-scheduler"), args: schedulerArgs(c),
			listens: []listen{{addr: loopback(c.Ports.Scheduler)}},
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "https://"+loopback(c.Ports.Scheduler)+"/healthz", "")
			},
			timeout: 60 * time.Second,
		},
		{
			name: compRegistry, binary: b.Paddock,
			args: []string{"dev", "registry", "--address=" + c.RegistryHost(), "--dir=" + c.path("registry"),
				"--reader-address=" + c.RegistryReaderHost(), "--reader-password-file=" + c.RegistryReaderPasswordFile()},
			listens: []listen{{addr: c.RegistryHost()}, {addr: c.RegistryReaderHost()}},
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "http://"+c.RegistryHost()+"/v2/", "")
			},
			timeout: 20 * time.Second,
		},
		{
			name: compInternet, binary: b.Paddock,
			args:       []string{"dev", "internet", "--dir=" + c.InternetDir(), "--network=" + c.InternetCIDR.String()},
			cloneflags: syscall.CLONE_NEWNET,
			attach:     func(pid int) error { return standin.Attach(pid, c.InternetCIDR) },
			ready:      func(ctx context.Context) error { return standin.NewClient(c.InternetDir()).Healthy(ctx) },
			timeout:    20 * time.Second,
		},
		{
			name: compContainerd, binary: "/usr/bin/containerd", args: []string{"--config=" + c.path("containerd", "config.toml")},
			env:     containerdEnv(b.GVisorDir),
			ready:   func(context.Context) error { return unixSocketServes(c.ContainerdSocket()) },
			timeout: 30 * time.Second,
		},
		{
			name: compCoreDNS, binary: filepath.Join(b.ToolsDir, "coredns"), args: []string{"-conf=" + c.path("coredns", "Corefile")},
			listens: []listen{{addr: node(c.Ports.DNS), udp: true}, {addr: loopback(c.Ports.DNSReady)}},
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "http://"+loopback(c.Ports.DNSReady)+"/ready", "")
			},
			timeout: 60 * time.Second,
		},
		{
			name: compKubelet, binary: filepath.Join(b.K8sDir, "kubelet"), args: kubeletArgs(c),
			listens: []listen{{addr: node(c.Ports.Kubelet)}, {addr: loopback(c.Ports.KubeletHealthz)}},
			ready: func(ctx context.Context) error {
				if err := httpOK(ctx, "http://"+loopback(c.Ports.KubeletHealthz)+"/healthz", ""); err != nil {
					return err
				}
				// After a restart on kept state the Node still says Ready from before; only a
				// heartbeat from this kubelet counts.
				if err := cl.nodeReady(ctx, NodeName); err != nil {
					return err
				}
				return cl.heartbeatSince(ctx, NodeName, c.process(compKubelet).startedAt())
			},
			timeout: 120 * time.Second,
		},
		{
			name: compNetpol, binary: filepath.Join(b.ToolsDir, kubeRouterBinary), args: netpolArgs(c),
			ready:   func(context.Context) error { return netpolReady() },
			timeout: 60 * time.Second,
		},
		{
			name: compProvisioner, binary: b.Paddock,
			args: []string{"dev", "provisioner", "--kubeconfig=" + c.KubeconfigPath(), "--dir=" + c.path("volumes")},
			// The provisioner has no endpoint: it is ready once it has started and keeps running.
			ready:   func(context.Context) error { return nil },
			timeout: 10 * time.Second,
		},
		{
			name: compKWOK, binary: filepath.Join(b.ToolsDir, "kwok"), args: kwokArgs(c, stages),
			listens: []listen{{addr: loopback(c.Ports.KWOK)}},
			ready: func(ctx context.Context) error {
				return httpOK(ctx, "http://"+loopback(c.Ports.KWOK)+"/healthz", "")
			},
			timeout: 60 * time.Second,
		},
		{
			name: compEgress, binary: cl.cfg.path("bin", "paddock-egress"), args: egressArgs(c), env: egressEnv(c),
			listens: []listen{{addr: ":" + strconv.Itoa(egressProxyPort)}, {addr: ":" + strconv.Itoa(egressDNSPort), udp: true}},
			ready:   func(ctx context.Context) error { return egressReady(ctx, c) },
			timeout: 60 * time.Second,
		},
	}
	m := make(map[string]component, len(list))
	for _, comp := range list {
		m[comp.name] = comp
	}
	return m
}

// containerdEnv puts gVisor's shim on containerd's PATH: containerd 1.6 looks a runtime's shim
// up there by its runtime_type (io.containerd.runsc.v1 → containerd-shim-runsc-v1) and does not
// honour runtime_path when it starts a pod's sandbox.
func containerdEnv(gvisorDir string) []string {
	if gvisorDir == "" {
		return nil
	}
	return []string{"PATH=" + gvisorDir + ":" + os.Getenv("PATH")}
}

// ensure starts comp unless it already runs, then waits until it is ready. It reports whether
// it started anything.
func (cl *cluster) ensure(ctx context.Context, comp component) (string, bool, error) {
	p := cl.cfg.process(comp.name)
	alive := func() error {
		if p.pid() == 0 {
			return fmt.Errorf("%s exited; last lines of %s:\n%s", comp.name, p.logFile, p.tail(25))
		}
		return nil
	}
	if pid := p.pid(); pid != 0 {
		if comp.attach != nil {
			if err := comp.attach(pid); err != nil {
				return "", false, err
			}
		}
		if err := comp.ready(ctx); err == nil {
			return fmt.Sprintf("already running (pid %d)", pid), false, nil
		}
		if err := poll(ctx, comp.timeout, comp.ready, alive); err != nil {
			return "", false, fmt.Errorf("%s (pid %d) runs but is not ready: %w\nlast lines of %s:\n%s", comp.name, pid, err, p.logFile, p.tail(25))
		}
		return fmt.Sprintf("running (pid %d), now ready", pid), false, nil
	}
	var busy []error
	for _, l := range comp.listens {
		if err := portInUse(l.addr, l.udp); err != nil {
			busy = append(busy, fmt.Errorf("%s cannot start: %w", comp.name, err))
		}
	}
	if err := errors.Join(busy...); err != nil {
		return "", false, err
	}
	pid, err := p.startWith(comp.binary, comp.args, comp.env, comp.cloneflags)
	if err != nil {
		return "", false, err
	}
	if comp.attach != nil {
		if err := comp.attach(pid); err != nil {
			return "", true, fmt.Errorf("%s (pid %d): %w", comp.name, pid, err)
		}
	}
	if err := poll(ctx, comp.timeout, comp.ready, alive); err != nil {
		if alive() != nil {
			return "", true, err // already names the exit and carries the log
		}
		return "", true, fmt.Errorf("%s (pid %d) %w\nlast lines of %s:\n%s", comp.name, pid, err, p.logFile, p.tail(25))
	}
	return fmt.Sprintf("started (pid %d)", pid), true, nil
}
