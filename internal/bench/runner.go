package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// pollInterval paces the harness's own status polls (pool fill, refill); the latencies it
// reports come from watch events, not from polls.
const pollInterval = 100 * time.Millisecond

// Runner runs scenarios against the API server of one rest.Config.
type Runner struct {
	c     client.WithWatch
	raw   rest.Interface
	disc  discovery.ServerVersionInterface
	image string
	// onKWOK places the sandboxes on KWOK nodes; see PlaceOnKWOK.
	onKWOK bool
	// controller is where the hold scenario finds the controller; see MeasureController.
	controller Controller
	// runtimeTarget is what the runtime scenario measures; see MeasureRuntime.
	runtimeTarget RuntimeTarget
	// e2bTarget is the front door the e2b scenarios measure; see MeasureE2B.
	e2bTarget E2BTarget
	// token is the kubeconfig's bearer token, presented to the controller's /metrics.
	token string
}

// NewRunner builds the clients. It lifts the client-side rate limit: the harness must not be the
// bottleneck it measures.
func NewRunner(cfg *rest.Config, image string) (*Runner, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 10000
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client from the kubeconfig: %w", err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client from the kubeconfig: %w", err)
	}
	if image == "" {
		image = DefaultImage
	}
	token := cfg.BearerToken
	if token == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the kubeconfig's token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &Runner{c: c, raw: d.RESTClient(), disc: d, image: image, runtimeTarget: DefaultRuntimeTarget(), e2bTarget: DefaultE2BTarget(), token: token}, nil
}

// Writes reads the API server's write counters from GET /metrics.
func (r *Runner) Writes(ctx context.Context) (Writes, error) {
	writes, _, err := r.requests(ctx)
	return writes, err
}

// requests reads the API server's write and read counters from one GET /metrics.
func (r *Runner) requests(ctx context.Context) (writes, reads Writes, err error) {
	body, err := r.raw.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the API server's /metrics (the kubeconfig's user needs get on the nonResourceURL /metrics): %w", err)
	}
	if writes, err = ParseWrites(bytes.NewReader(body)); err != nil {
		return nil, nil, err
	}
	reads, err = ParseReads(bytes.NewReader(body))
	return writes, reads, err
}

// Conditions records what the run is measured on.
func (r *Runner) Conditions(ctx context.Context) (Conditions, error) {
	c := Conditions{Time: time.Now().UTC(), GoVersion: runtime.Version(), LoadAverage: loadAverage()}
	if v, err := r.disc.ServerVersion(); err == nil {
		c.ServerVersion = v.GitVersion
	}
	objects, err := r.countObjects(ctx)
	if err != nil {
		return c, err
	}
	c.Nodes = objects["nodes"]
	delete(objects, "nodes")
	c.Objects = objects
	return c, nil
}

// countObjects counts, cluster-wide, the objects whose number changes what a controller's caches
// and the API server's watches carry.
func (r *Runner) countObjects(ctx context.Context) (map[string]int, error) {
	objects := map[string]int{}
	counts := []struct {
		name string
		gvk  schema.GroupVersionKind
	}{
		{"nodes", corev1.SchemeGroupVersion.WithKind("NodeList")},
		{"pods", corev1.SchemeGroupVersion.WithKind("PodList")},
		{"sandboxes", agentsv1beta1.GroupVersion.WithKind("SandboxList")},
		{"sandboxclaims", extensionsv1beta1.GroupVersion.WithKind("SandboxClaimList")},
		{"sandboxwarmpools", extensionsv1beta1.GroupVersion.WithKind("SandboxWarmPoolList")},
	}
	for _, k := range counts {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.gvk)
		if err := r.c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("counting %s: %w", k.name, err)
		}
		objects[k.name] = len(list.Items)
	}
	return objects, nil
}

// namespace creates the scenario's namespace; the returned function deletes it and everything
// the scenario made in it (explicitly, since a bare API server runs no garbage collector).
func (r *Runner) namespace(ctx context.Context, cleanupTimeout time.Duration) (string, func(), error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "paddock-bench-"}}
	if err := r.c.Create(ctx, ns); err != nil {
		return "", nil, fmt.Errorf("creating the scenario namespace: %w", err)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		for _, kind := range []string{"SandboxClaim", "SandboxWarmPool", "Sandbox", "SandboxTemplate"} {
			if err := r.deleteAll(ctx, kind, ns.Name); err != nil {
				klog.FromContext(ctx).Error(err, "Cleaning up the scenario namespace", "namespace", ns.Name, "kind", kind)
			}
		}
		// Wait for the deletions to be processed, then delete what is left of the Pods and wait
		// for them too, so that neither these writes (the garbage collector's Pod deletes
		// included) nor their reconciles land in the next scenario's numbers.
		r.waitGone(ctx, ns.Name, "SandboxClaim", "Sandbox")
		if err := r.deleteAll(ctx, "Pod", ns.Name); err != nil {
			klog.FromContext(ctx).Error(err, "Cleaning up the scenario namespace", "namespace", ns.Name, "kind", "Pod")
		}
		r.waitGone(ctx, ns.Name, "Pod")
		if err := r.c.Delete(ctx, ns); err != nil {
			klog.FromContext(ctx).Error(err, "Deleting the scenario namespace", "namespace", ns.Name)
		}
	}
	return ns.Name, cleanup, nil
}

// objectsCleanup returns the cleanup of a scenario run in the existing namespace ns: it deletes
// the template and pool the scenario made there (their members go with them) and leaves
// everything else.
func (r *Runner) objectsCleanup(ns string, timeout time.Duration) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for _, obj := range []client.Object{newPool(ns, 0), &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: ns}}} {
			if err := r.c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				klog.FromContext(ctx).Error(err, "Cleaning up the scenario's objects", "namespace", ns, "name", obj.GetName())
			}
		}
	}
}

// benchKinds are the kinds a scenario creates, with their API group versions.
var benchKinds = map[string]schema.GroupVersion{
	"SandboxClaim": extensionsv1beta1.GroupVersion, "SandboxWarmPool": extensionsv1beta1.GroupVersion,
	"SandboxTemplate": extensionsv1beta1.GroupVersion, "Sandbox": agentsv1beta1.GroupVersion,
	"Pod": corev1.SchemeGroupVersion,
}

// deleteAll deletes every object of kind in ns: one collection delete, or, when the API server
// gives up on that (thousands of objects outlast its request timeout), one delete per object.
func (r *Runner) deleteAll(ctx context.Context, kind, ns string) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(benchKinds[kind].WithKind(kind))
	if err := r.c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err == nil {
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(benchKinds[kind].WithKind(kind + "List"))
	if err := r.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	items := make(chan *metav1.PartialObjectMetadata)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range holdCreators {
		wg.Go(func() {
			for item := range items {
				if err := r.c.Delete(ctx, item); client.IgnoreNotFound(err) != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range list.Items {
		item := &list.Items[i]
		item.SetGroupVersionKind(obj.GroupVersionKind())
		items <- item
	}
	close(items)
	wg.Wait()
	return errors.Join(errs...)
}

// waitGone polls until ns holds no object of kinds, logging when ctx ends first.
func (r *Runner) waitGone(ctx context.Context, ns string, kinds ...string) {
	if err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		return r.namespaceEmpty(ctx, ns, kinds...)
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Scenario objects still present after cleanup", "namespace", ns, "kinds", kinds)
	}
}

// namespaceEmpty reports whether no object of kinds is left in ns.
func (r *Runner) namespaceEmpty(ctx context.Context, ns string, kinds ...string) (bool, error) {
	for _, kind := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(benchKinds[kind].WithKind(kind + "List"))
		if err := r.c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// poolFull reports whether the pool has replicas Ready members that no claim has taken. It counts
// members through status.selector rather than trusting status.readyReplicas, which lags behind
// adoptions for a moment and would end a refill wait before it began.
func (r *Runner) poolFull(ctx context.Context, ns string, replicas int) (bool, error) {
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, pool); err != nil {
		return false, err
	}
	if int(pool.Status.ReadyReplicas) < replicas || pool.Status.Selector == "" {
		return int(pool.Status.ReadyReplicas) >= replicas, nil
	}
	sel, err := labels.Parse(pool.Status.Selector)
	if err != nil {
		return false, fmt.Errorf("pool status.selector %q: %w", pool.Status.Selector, err)
	}
	list := &agentsv1beta1.SandboxList{}
	if err := r.c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, err
	}
	ready := 0
	for _, sb := range list.Items {
		owner := metav1.GetControllerOf(&sb)
		if owner != nil && owner.Kind == "SandboxWarmPool" && sb.DeletionTimestamp == nil &&
			meta.IsStatusConditionTrue(sb.Status.Conditions, readyCondition) {
			ready++
		}
	}
	return ready >= replicas, nil
}

// waitPoolFull polls until the pool is full or timeout passes.
func (r *Runner) waitPoolFull(ctx context.Context, ns string, replicas int, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		return r.poolFull(ctx, ns, replicas)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("warm pool %s/%s did not reach %d Ready members within %s; is a controller serving SandboxWarmPools, and do its Pods become Ready?", ns, poolName, replicas, timeout)
	}
	return err
}

// MeasureController tells the hold scenario where the controller under test runs.
func (r *Runner) MeasureController(c Controller) { r.controller = c }

// MeasureRuntime sets the sandbox image and router of the runtime scenario (default:
// DefaultRuntimeTarget).
func (r *Runner) MeasureRuntime(t RuntimeTarget) { r.runtimeTarget = t }

// MeasureE2B sets the front door and template of the e2b scenarios (default: DefaultE2BTarget).
func (r *Runner) MeasureE2B(t E2BTarget) { r.e2bTarget = t }

// PlaceOnKWOK makes every Sandbox of the run select and tolerate KWOK's fake nodes.
func (r *Runner) PlaceOnKWOK() { r.onKWOK = true }

// loadAverage is the harness machine's load average (Linux), or "" where it cannot be read.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return ""
	}
	return strings.Join(fields[:3], " ")
}
