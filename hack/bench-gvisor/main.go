// Command bench-gvisor measures what gVisor costs a sandbox on the real node of `paddock dev up`:
// the time from creating a Sandbox to Ready (p50 and max of --count cold starts, one at a time),
// and the memory (PSS) of an idle sandbox, each under runc and under RuntimeClass gvisor. The
// sandboxes are the pod of examples/sandboxd-template.yaml (sandboxd on the dev sandbox image).
//
// Memory is read from the host: the PSS of every containerd shim and its descendants (the
// containers' processes, and for gVisor the sandbox and the gofer), once before the sandboxes
// exist and once with all --count of them idle, divided by --count. So it must run as root on
// the node, and nothing else should start or stop pods meanwhile.
//
//	go run ./hack/bench-gvisor --kubeconfig /var/lib/paddock-dev/kubeconfig --count 10
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/manager"
)

type options struct {
	Kubeconfig string
	Count      int
	Template   string
	Timeout    time.Duration
}

func (o *options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "/var/lib/paddock-dev/kubeconfig", "kubeconfig of the paddock dev cluster")
	fs.IntVar(&o.Count, "count", 10, "cold starts per runtime, one at a time; as many idle sandboxes are measured for memory")
	fs.StringVar(&o.Template, "template", "examples/sandboxd-template.yaml", "SandboxTemplate manifest whose pod the sandboxes run")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "how long one sandbox may take to become Ready or go away")
}

func (o *options) Validate() error {
	var errs []error
	if o.Count < 1 || o.Count > 50 {
		errs = append(errs, fmt.Errorf("--count %d is out of range; want 1 to 50 (the dev node has two cores)", o.Count))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s must be positive", o.Timeout))
	}
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("bench-gvisor reads other processes' memory (/proc/PID/smaps_rollup); run it as root on the dev node"))
	}
	return errors.Join(errs...)
}

func main() {
	o := &options{}
	// A FlagSet of its own: controller-runtime registers --kubeconfig on flag.CommandLine.
	fs := flag.NewFlagSet("bench-gvisor", flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-gvisor:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-gvisor:", err)
		os.Exit(1)
	}
}

type result struct {
	runtime       string
	starts        []time.Duration
	pssPerSandbox int64 // bytes
}

func run(ctx context.Context, o *options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		return err
	}
	spec, err := podSpec(o.Template)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-gvisor-"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.Background(), ns) }()

	var results []result
	for _, rc := range []string{"", devcluster.GVisorRuntimeClass} {
		s := spec.DeepCopy()
		s.RuntimeClassName = nil
		name := "runc"
		if rc != "" {
			s.RuntimeClassName = &rc
			name = "gvisor"
		}
		r, err := measure(ctx, c, o, ns.Name, name, *s)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\n| runtime | cold start to Ready, p50 | max | idle PSS per sandbox |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %s | %s | %s | %.0f MiB |\n", r.runtime, percentile(r.starts, 50), slices.Max(r.starts).Round(time.Millisecond), float64(r.pssPerSandbox)/(1<<20))
	}
	return nil
}

// podSpec reads the pod of the SandboxTemplate in file.
func podSpec(file string) (corev1.PodSpec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return corev1.PodSpec{}, fmt.Errorf("--template: %w (run from the checkout's root)", err)
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := yaml.Unmarshal(data, tpl); err != nil {
		return corev1.PodSpec{}, fmt.Errorf("--template %s: %w", file, err)
	}
	return tpl.Spec.PodTemplate.Spec, nil
}

// measure starts o.Count Sandboxes one after the other, timing each to Ready, then reads the
// memory they add, and deletes them.
func measure(ctx context.Context, c client.Client, o *options, ns, runtime string, spec corev1.PodSpec) (result, error) {
	r := result{runtime: runtime}
	before, err := shimTreesPSS()
	if err != nil {
		return r, err
	}
	var made []*agentsv1beta1.Sandbox
	defer func() {
		for _, sb := range made {
			_ = c.Delete(context.Background(), sb)
		}
	}()
	for i := range o.Count {
		sb := &agentsv1beta1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", runtime, i)},
			Spec:       agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: spec}}},
		}
		start := time.Now()
		if err := c.Create(ctx, sb); err != nil {
			return r, err
		}
		made = append(made, sb)
		if err := waitFor(ctx, o.Timeout, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady), nil
		}); err != nil {
			return r, fmt.Errorf("sandbox %s not Ready: %w", sb.Name, err)
		}
		r.starts = append(r.starts, time.Since(start))
		fmt.Fprintf(os.Stderr, "%s: sandbox %d Ready after %s\n", runtime, i, time.Since(start).Round(time.Millisecond))
	}
	after, err := shimTreesPSS()
	if err != nil {
		return r, err
	}
	r.pssPerSandbox = (after - before) / int64(o.Count)
	for _, sb := range made {
		if err := c.Delete(ctx, sb); err != nil && !apierrors.IsNotFound(err) {
			return r, err
		}
	}
	for _, sb := range made {
		if err := waitFor(ctx, o.Timeout, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.Name}, &corev1.Pod{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			return r, fmt.Errorf("pod %s not gone: %w", sb.Name, err)
		}
	}
	made = nil
	return r, nil
}

func waitFor(ctx context.Context, timeout time.Duration, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Millisecond)
}

// shimTreesPSS sums the proportional set size of every containerd shim and its descendants.
func shimTreesPSS() (int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	children := map[int][]int{}
	var shims []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], pid)
		if strings.HasPrefix(s[open+1:end], "containerd-shim") {
			shims = append(shims, pid)
		}
	}
	var total int64
	seen := map[int]bool{}
	queue := shims
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		total += pss(pid)
		queue = append(queue, children[pid]...)
	}
	return total, nil
}

// pss is a process's Pss from smaps_rollup, in bytes; 0 when it is gone.
func pss(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
