// Command bench-wake measures scale to zero on a running local cluster (`paddock dev up`, under
// the machine lock): the wake latency, from a request through paddock-router to a sandbox
// suspended for being idle until its response, over --count wakes, and prints p50 and p99.
//
//	flock /tmp/paddock-cluster.lock go run ./hack/bench-wake --kubeconfig /var/lib/paddock-dev/kubeconfig --count 20 [--runtime-class gvisor]
//
// Each round suspends the sandbox as the idle controller does (operatingMode Suspended and
// paddock.dev/suspend-reason Idle), waits until its Pod is gone, then times one routed request.
// A watch on the namespace's Pods and on the Sandbox timestamps where each wake's time goes (the
// resume patch, Pod created, scheduled, container running, Pod Ready, Sandbox Ready, answered);
// the medians of those steps are printed after the latencies. --writes-idle-timeout then counts the
// API writes an idle policy costs (writes.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// Options are the command-line options.
type Options struct {
	Kubeconfig, RuntimeClass, RouterNamespace string
	Count                                     int
	Timeout                                   time.Duration
	// ReadinessPeriodSeconds and StartupPeriodSeconds, when set, replace the example's probes,
	// to compare probe settings without editing the example.
	ReadinessPeriodSeconds, StartupPeriodSeconds int
	NoStartupProbe                               bool
	// WritesIdleTimeout, when set, ends the run with the write count of an idle policy: this idle
	// timeout, WritesActive of one request a second, then WritesIdle suspended.
	WritesIdleTimeout, WritesActive, WritesIdle time.Duration
}

// AddFlags registers the options.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "/var/lib/paddock-dev/kubeconfig", "Kubeconfig of the local cluster.")
	fs.StringVar(&o.RuntimeClass, "runtime-class", "", "RuntimeClass of the sandbox (for example gvisor); empty runs the node's default runtime (runc), whatever the example names.")
	fs.StringVar(&o.RouterNamespace, "router-namespace", "paddock-system", "Namespace of paddock-router.")
	fs.IntVar(&o.Count, "count", 20, "Wakes to measure.")
	fs.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "Bound on the whole run.")
	fs.IntVar(&o.ReadinessPeriodSeconds, "readiness-period-seconds", 0, "periodSeconds of sandboxd's readiness probe; 0 keeps the example's.")
	fs.DurationVar(&o.WritesIdleTimeout, "writes-idle-timeout", 0, "After the wakes, count API writes under this paddock.dev/idle-timeout (for example 1m); 0 skips it.")
	fs.DurationVar(&o.WritesActive, "writes-active", 3*time.Minute, "How long --writes-idle-timeout's phase sends one request a second.")
	fs.DurationVar(&o.WritesIdle, "writes-idle", 3*time.Minute, "How long --writes-idle-timeout's phase counts writes once the sandbox is suspended for being idle.")
	fs.BoolVar(&o.NoStartupProbe, "no-startup-probe", false, "Drop sandboxd's startup probe, if it has one.")
	fs.IntVar(&o.StartupPeriodSeconds, "startup-period-seconds", 0, "periodSeconds of sandboxd's startup probe (its readiness check if the example has none); 0 keeps the example's.")
}

// Validate names the flag that is wrong.
func (o *Options) Validate() error {
	if o.Count < 1 {
		return fmt.Errorf("--count=%d must be at least 1", o.Count)
	}
	if o.ReadinessPeriodSeconds < 0 || o.StartupPeriodSeconds < 0 {
		return fmt.Errorf("--readiness-period-seconds=%d and --startup-period-seconds=%d must not be negative", o.ReadinessPeriodSeconds, o.StartupPeriodSeconds)
	}
	return nil
}

func main() {
	o := &Options{}
	fs := flag.NewFlagSet("bench-wake", flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-wake:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-wake:", err)
		os.Exit(1)
	}
}

func run(o *Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-wake-"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.Background(), ns) }()
	sb, err := sandbox(ns.Name, o)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, sb); err != nil {
		return err
	}
	token, err := clientToken(ctx, c, ns.Name)
	if err != nil {
		return err
	}
	router, err := routerURL(ctx, c, o.RouterNamespace)
	if err != nil {
		return err
	}
	if err := until(ctx, func() bool { return ready(ctx, c, sb) }); err != nil {
		return fmt.Errorf("sandbox never turned Ready: %w", err)
	}
	fmt.Printf("load average at the start: %s\n", loadAverage())
	var wakes []time.Duration
	var timelines []timeline
	for i := range o.Count {
		if err := suspendForIdle(ctx, c, sb); err != nil {
			return err
		}
		tl, err := wakeOnce(ctx, c, router+"/v1/health", token, sb)
		if err != nil {
			return fmt.Errorf("wake %d: %w", i+1, err)
		}
		wakes = append(wakes, tl.at[stepAnswered])
		timelines = append(timelines, tl)
		fmt.Printf("wake %d: %s\n", i+1, tl)
	}
	slices.Sort(wakes)
	runtime := o.RuntimeClass
	if runtime == "" {
		runtime = "runc"
	}
	fmt.Printf("runtime %s, %d wakes: p50 %s, p99 %s, min %s, max %s\n", runtime, len(wakes),
		pct(wakes, 50).Round(time.Millisecond), pct(wakes, 99).Round(time.Millisecond),
		wakes[0].Round(time.Millisecond), wakes[len(wakes)-1].Round(time.Millisecond))
	printSteps(timelines)
	fmt.Printf("load average at the end: %s\n", loadAverage())
	if o.WritesIdleTimeout > 0 {
		// An authorized call, which sandboxd counts as activity (health probes are not).
		return measureWrites(ctx, c, router+"/v1/metadata", token, sb, o.WritesIdleTimeout, o.WritesActive, o.WritesIdle)
	}
	return nil
}

// loadAverage is the node's 1, 5 and 15 minute load average (the bench runs on the dev node),
// to tell a quiet run from one that shared the CPUs.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, (len(sorted)*p+99)/100-1)]
}

func sandbox(ns string, o *Options) (*agentsv1beta1.Sandbox, error) {
	objs, err := framework.ReadExample("sandboxd-template.yaml")
	if err != nil {
		return nil, err
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if len(objs) != 1 || runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, tpl) != nil {
		return nil, fmt.Errorf("examples/sandboxd-template.yaml holds %d objects; want the one SandboxTemplate", len(objs))
	}
	spec := tpl.Spec.PodTemplate.Spec
	// The example names gvisor; runc is the node's default runtime, so no RuntimeClass at all.
	spec.RuntimeClassName = nil
	if o.RuntimeClass != "" {
		spec.RuntimeClassName = ptr.To(o.RuntimeClass)
	}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		if o.ReadinessPeriodSeconds > 0 && ct.ReadinessProbe != nil {
			ct.ReadinessProbe.PeriodSeconds = int32(o.ReadinessPeriodSeconds)
		}
		if o.NoStartupProbe {
			ct.StartupProbe = nil
		}
		if o.StartupPeriodSeconds > 0 && ct.ReadinessProbe != nil {
			if ct.StartupProbe == nil {
				ct.StartupProbe = &corev1.Probe{ProbeHandler: ct.ReadinessProbe.ProbeHandler, FailureThreshold: 60}
			}
			ct.StartupProbe.PeriodSeconds = int32(o.StartupPeriodSeconds)
		}
	}
	return builder.MakeSandbox("waker", ns).PodSpec(spec).Obj(), nil
}

// suspendForIdle suspends sb as the idle controller does and waits until it reports Suspended and
// its Pod is gone, so that every Pod event of the next wake is the new Pod's.
func suspendForIdle(ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"operatingMode":%q}}`,
		agentsv1beta1.SuspendReasonAnnotation, agentsv1beta1.SuspendReasonIdle, agentsv1beta1.SandboxOperatingModeSuspended)
	if err := c.Patch(ctx, sb, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return err
	}
	return until(ctx, func() bool {
		got, pods := &agentsv1beta1.Sandbox{}, &corev1.PodList{}
		return c.Get(ctx, client.ObjectKeyFromObject(sb), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionSuspended) &&
			c.List(ctx, pods, client.InNamespace(sb.Namespace)) == nil && len(pods.Items) == 0
	})
}

func ready(ctx context.Context, c client.Client, sb *agentsv1beta1.Sandbox) bool {
	got := &agentsv1beta1.Sandbox{}
	return c.Get(ctx, client.ObjectKeyFromObject(sb), got) == nil &&
		meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionReady)
}

func until(ctx context.Context, done func() bool) error {
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func get(ctx context.Context, url, ns, name, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", "8080")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %d %s", url, resp.StatusCode, body)
	}
	return nil
}

// routerURL is the address of a Ready router Pod (the dev cluster runs no kube-proxy).
func routerURL(ctx context.Context, c client.Client, ns string) (string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "paddock-router"}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return "http://" + net.JoinHostPort(p.Status.PodIP, "8080"), nil
		}
	}
	return "", fmt.Errorf("no running paddock-router Pod in namespace %s", ns)
}

// clientToken makes a ServiceAccount allowed through the router to sandboxes in ns.
func clientToken(ctx context.Context, c client.Client, ns string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-wake", Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bench-wake", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{authz.SandboxAccess.Group}, Resources: []string{authz.SandboxAccess.Resource + "/" + authz.SandboxAccess.Subresource},
		Verbs: []string{authz.SandboxAccess.Verb}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-wake", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return "", err
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
