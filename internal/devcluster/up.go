package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/paddock-dev/paddock/internal/standin"
)

// UpOptions tune `paddock dev up`.
type UpOptions struct {
	// InstallPackages lets up run apt-get for missing Debian packages.
	InstallPackages bool
	// Out receives one progress line per step.
	Out io.Writer
	// InstallPaddock builds Paddock's images from the source tree and installs the controller
	// (core and extensions) into the cluster.
	InstallPaddock bool
	// RouterAuthz is the router's --authz-mode: RouterAuthzTokenReview (the bundle's, when
	// empty) or RouterAuthzAllowAll.
	RouterAuthz string
	// Profile is the install profile: ProfileDefault (when empty) or
	// ProfileUpstreamUnauthenticatedMigration.
	Profile string
}

// The install profiles `paddock dev up --profile` accepts.
const (
	// ProfileDefault installs dist/paddock.yaml and dist/paddock-router.yaml.
	ProfileDefault = "default"
	// ProfileUpstreamUnauthenticatedMigration installs dist/upstream-unauthenticated-migration.yaml:
	// upstream's tokenless direct paths, UNSAFE (docs/compatibility.md, "Install profiles").
	ProfileUpstreamUnauthenticatedMigration = "upstream-unauthenticated-migration"
)

// The router authorization modes `paddock dev up --router-authz` accepts.
const (
	RouterAuthzTokenReview = "tokenreview"
	RouterAuthzAllowAll    = "allow-all"
)

type cluster struct {
	cfg         Config
	routerAuthz string
	profile     string
	bin         Binaries
	tokens      tokens
	client      kubernetes.Interface
	out         io.Writer
	// e2bExports are the E2B variables installE2B prints at the end.
	e2bExports string
	// env is the environment images' root filesystem build, started early when Paddock is
	// installed.
	env *envBuild
}

// step runs fn and prints one line with its outcome and duration. changed tells whether fn
// did anything, so a no-op `up` can say so.
type step struct {
	name string
	run  func(ctx context.Context) (detail string, changed bool, err error)
}

// Up brings the cluster up, or completes it: components already running and ready are left
// alone, so a second Up on a healthy cluster changes nothing.
func Up(ctx context.Context, cfg Config, opts UpOptions) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := requireRoot(); err != nil {
		return err
	}
	cl := &cluster{cfg: cfg, out: opts.Out, routerAuthz: opts.RouterAuthz, profile: opts.Profile}
	defer cl.stopEnvBuild()
	steps := []step{
		{"debian packages", func(context.Context) (string, bool, error) {
			missing := missingPackages(Packages)
			if len(missing) == 0 {
				return "installed", false, nil
			}
			return "installed " + strings.Join(missing, " "), true, ensurePackages(opts.InstallPackages)
		}},
	}
	if opts.InstallPaddock {
		// The Debian root filesystem builds while the binaries build and the cluster starts.
		steps = append(steps, step{"env root filesystems", cl.startEnvBuild})
	}
	steps = append(steps, []step{
		{"binaries", cl.buildBinaries},
		{"configuration", cl.writeConfiguration},
		{"node network", func(context.Context) (string, bool, error) {
			if err := claimHost(cfg); err != nil {
				return "", false, err
			}
			if err := ensureNodeInterface(cfg.NodeIP); err != nil {
				return "", false, err
			}
			if err := ensureGuard(cfg); err != nil {
				return "", false, err
			}
			return nodeInterface + " " + cfg.NodeIP.String() + "; pods and the stand-in route to " + cfg.PodCIDR.String() + " and " + cfg.InternetCIDR.String() + " only", false, nil
		}},
		{"node cgroups", func(context.Context) (string, bool, error) { return ensureKubeletCgroupRoot() }},
		{"control plane cgroup", func(context.Context) (string, bool, error) { return ensureControlPlaneCgroup() }},
	}...)
	for _, name := range componentOrder {
		if name == compEgress {
			continue // after Paddock, below
		}
		steps = append(steps, cl.componentStep(name))
		switch name {
		case compAPIServer:
			steps = append(steps, step{"api client", cl.connect})
		case compRegistry:
			steps = append(steps, step{"images", cl.pushImages})
		case compKubelet:
			steps = append(steps, step{"node pod range", cl.ensureNodePodCIDR}, step{"storage class", cl.ensureStorageClass}, step{"gvisor runtime class", cl.ensureGVisorRuntimeClass})
		case compKWOK:
			steps = append(steps, step{"kwok nodes", cl.ensureKWOKNodes})
		}
	}
	steps = append(steps, step{"default service account", cl.waitDefaultServiceAccount})
	if opts.InstallPaddock {
		steps = append(steps, step{"paddock", cl.installPaddock}, step{compEgress, cl.ensureEgress}, step{"env images", cl.pushEnvImages}, step{"e2b front door", cl.installE2B})
	}

	start := time.Now()
	changed := false
	for _, s := range steps {
		t := time.Now()
		detail, did, err := s.run(ctx)
		if err != nil {
			cl.printf("  x %-24s failed after %s\n", s.name, since(t))
			return fmt.Errorf("%s: %w", s.name, err)
		}
		changed = changed || did
		cl.printf("  ✓ %-24s %s (%s)\n", s.name, detail, since(t))
	}
	if !changed {
		cl.printf("paddock dev: the cluster was already up and healthy; nothing to do (%s).\n", since(start))
	} else {
		cl.printf("paddock dev: cluster up in %s.\n", since(start))
	}
	cl.printf("\nUse it with:\n  export KUBECONFIG=%s\n  kubectl get nodes\n  kubectl run demo --image %s -- sleep 3600\nImages: push to %s (plain HTTP on loopback). Stop it with: paddock dev down --state-dir %s\n",
		cfg.KubeconfigPath(), cfg.BusyboxImage(), cfg.RegistryHost(), cfg.StateDir)
	cl.printf("Internet stand-in: %s resolved by %s (%s), CA %s; nothing leaves this machine.\n",
		strings.Join(standin.DefaultHosts, ", "), cfg.InternetResolver(), cfg.InternetCIDR, standin.CACertPath(cfg.InternetDir()))
	if cl.env != nil {
		cl.printf("Sandboxes run %s (Debian with Python, Node.js, git, curl and a C toolchain; docs/environments.md), %s (the same with Python's data stack, for the code interpreter) or the minimal %s.\n",
			cfg.EnvBaseImage(), cfg.CodeInterpreterImage(), cfg.SandboxImage())
	}
	if cl.e2bExports != "" {
		cl.printf("\nE2B SDK programs (npm e2b, Python e2b) run against the cluster with:\n%s", cl.e2bExports)
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func (cl *cluster) printf(format string, args ...any) {
	if cl.out != nil {
		fmt.Fprintf(cl.out, format, args...)
	}
}

func (cl *cluster) componentStep(name string) step {
	return step{name, func(ctx context.Context) (string, bool, error) {
		return cl.ensure(ctx, cl.components()[name])
	}}
}

// buildBinaries builds (or finds cached) every binary, with the scripts of the source tree.
func (cl *cluster) buildBinaries(ctx context.Context) (string, bool, error) {
	src := cl.cfg.SourceDir
	k8s := []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubelet"}
	dir, builtK8s, err := cl.script(ctx, filepath.Join(src, "hack", "build-k8s.sh"), k8s...)
	if err != nil {
		return "", false, err
	}
	tools, builtTools, err := cl.script(ctx, filepath.Join(src, "hack", "build-dev-tools.sh"), "kwok", "coredns", "kube-router")
	if err != nil {
		return "", false, err
	}
	cl.bin = Binaries{K8sDir: dir, ToolsDir: tools, Pause: cl.cfg.path("bin", "pause"), Paddock: cl.cfg.path("bin", "paddock")}
	built := builtK8s || builtTools
	if cl.cfg.GVisor {
		gvisor, builtGVisor, err := cl.script(ctx, filepath.Join(src, "hack", "build-gvisor.sh"))
		if err != nil {
			return "", false, err
		}
		cl.bin.GVisorDir = gvisor
		built = built || builtGVisor
	}
	if !exists(cl.bin.Pause) {
		if err := goBuild(ctx, src, "./cmd/pause", cl.bin.Pause); err != nil {
			return "", false, err
		}
		built = true
	}
	if err := installSelf(cl.bin.Paddock); err != nil {
		return "", false, err
	}
	if built {
		return "built into " + dir, true, nil
	}
	return "cached in " + dir, false, nil
}

// script runs a hack/ build script, passing its progress (stderr) through, and returns the
// directory it prints and whether it built anything (the scripts say "building" when they do).
func (cl *cluster) script(ctx context.Context, path string, args ...string) (string, bool, error) {
	if !exists(path) {
		return "", false, fmt.Errorf("%s not found: run paddock dev from a Paddock checkout or pass --source-dir", path)
	}
	var progress strings.Builder
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = cl.cfg.SourceDir
	cmd.Stderr = &progress
	if cl.out != nil {
		cmd.Stderr = io.MultiWriter(&progress, cl.out)
	}
	out, err := cmd.Output()
	if err != nil {
		return "", false, fmt.Errorf("%s %s: %w\n%s", path, strings.Join(args, " "), err, progress.String())
	}
	return strings.TrimSpace(string(out)), strings.Contains(progress.String(), "building"), nil
}

func goBuild(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// installSelf copies the running executable into the state dir: the registry and provisioner
// run from that copy, which outlives a `go run` build directory. The rename keeps a running
// copy intact.
func installSelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if self == dst {
		return nil
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// writeConfiguration writes the PKI once and every rendered file each time (they are a pure
// function of the Config, so rewriting them changes nothing for a running component).
func (cl *cluster) writeConfiguration(context.Context) (string, bool, error) {
	c := cl.cfg
	if err := ensurePKI(c); err != nil {
		return "", false, err
	}
	t, err := readTokens(c)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w; remove the state dir (paddock dev down) to start afresh", c.path("pki", "tokens.csv"), err)
	}
	cl.tokens = t
	ca, err := os.ReadFile(c.path("pki", "ca.crt"))
	if err != nil {
		return "", false, err
	}
	snapshotter, err := containerdSnapshotter(c.path("containerd"))
	if err != nil {
		return "", false, err
	}
	files := map[string]string{
		c.KubeconfigPath():                            kubeconfig(c.APIServerURL(), ca, t.Admin),
		c.path("kubelet", "kubeconfig"):               kubeconfig(c.APIServerURL(), ca, t.Kubelet),
		c.path("kubelet", "config.yaml"):              kubeletConfig(c),
		c.path("kubelet", "resolv.conf"):              kubeletResolvConf(c),
		c.path("containerd", "config.toml"):           containerdConfig(c, cl.bin.GVisorDir, snapshotter),
		c.path("cni", "net.d", "10-paddock.conflist"): cniConfig(c),
		c.path("coredns", "Corefile"):                 corefile(c),
		c.path("kwok", "kwok.yaml"):                   kwokConfig(),
	}
	if cl.bin.GVisorDir != "" {
		files[c.runscConfigPath()] = runscConfig(filepath.Join(cl.bin.GVisorDir, "runsc"))
	} else if err := os.Remove(c.runscConfigPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", false, err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return "", false, err
		}
	}
	for _, d := range []string{c.path("kubelet", "pod-logs"), c.path("volumes"), c.path("registry")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", false, err
		}
	}
	return "in " + c.StateDir + ", containerd snapshotter " + snapshotter, false, nil
}

func (cl *cluster) connect(context.Context) (string, bool, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", cl.cfg.KubeconfigPath())
	if err != nil {
		return "", false, err
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	cl.client, err = kubernetes.NewForConfig(restCfg)
	return cl.cfg.APIServerURL(), false, err
}

func (cl *cluster) nodeReady(ctx context.Context, name string) error {
	if cl.client == nil {
		return fmt.Errorf("no API client yet")
	}
	node, err := cl.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s is not Ready: %s: %s", name, cond.Reason, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", name)
}

// heartbeatSince fails unless the node's Ready condition was last reported at or after t.
func (cl *cluster) heartbeatSince(ctx context.Context, name string, t time.Time) error {
	node, err := cl.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		// Heartbeats have whole seconds; allow for the truncation.
		if cond.Type == corev1.NodeReady && !cond.LastHeartbeatTime.Add(time.Second).Before(t) {
			return nil
		}
	}
	return fmt.Errorf("node %s has not reported since its kubelet started at %s", name, t.Format(time.RFC3339))
}

// ensureNodePodCIDR records the CNI bridge's range as the real node's spec.podCIDRs. The
// controller manager's node IPAM is off (the bridge hands out addresses), so nothing else sets
// it, and without it the managed NetworkPolicy's discovery, which reads Nodes' podCIDRs, would
// not deny the pod range. The field can be set once; a node that has another range is an error.
func (cl *cluster) ensureNodePodCIDR(ctx context.Context) (string, bool, error) {
	want := cl.cfg.PodCIDR.String()
	node, err := cl.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	switch {
	case slices.Equal(node.Spec.PodCIDRs, []string{want}):
		return want, false, nil
	case node.Spec.PodCIDR != "" || len(node.Spec.PodCIDRs) > 0:
		return "", false, fmt.Errorf("node %s has spec.podCIDRs %v, not the bridge's %s; it cannot change: paddock dev down and up again", NodeName, node.Spec.PodCIDRs, want)
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, want, want)
	if _, err := cl.client.CoreV1().Nodes().Patch(ctx, NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return "", false, fmt.Errorf("set node %s spec.podCIDRs to %s: %w", NodeName, want, err)
	}
	return want, true, nil
}

func (cl *cluster) waitDefaultServiceAccount(ctx context.Context) (string, bool, error) {
	err := poll(ctx, 60*time.Second, func(ctx context.Context) error {
		_, err := cl.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the controller manager has not created serviceaccount default/default yet")
		}
		return err
	}, nil)
	return "default/default exists", false, err
}
