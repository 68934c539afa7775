package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/sdk"
)

// DefaultRuntimeImage is the sandbox image of the runtime scenario: sandboxd with a shell, as
// `paddock dev up` builds it into the local cluster's registry.
const DefaultRuntimeImage = "127.0.0.1:5001/paddock/sandbox:dev"

// runtimeSandbox names the one Sandbox of a runtime scenario.
const runtimeSandbox = "runtime"

// runtimeWarmup requests go to each path before it is measured, so that connection set-up and
// the first process start in the sandbox land in no percentile.
const runtimeWarmup = 10

// RuntimeTarget is what the runtime scenario measures besides the API: a sandbox image that runs
// sandboxd, and paddock-router's Pods. The harness sends its requests to Pod IPs, so it must run
// where those are routable, as on the node of `paddock dev up`.
type RuntimeTarget struct {
	// Image runs sandboxd with its REST API on RESTPort and its legacy runtime API (the SDK's
	// Runtime) on LegacyPort.
	Image                string
	RESTPort, LegacyPort int
	// Router selects the router's Pods; an empty Selector measures no router.
	Router RouterTarget
}

// RouterTarget locates paddock-router: the Ready Pods matching Selector in Namespace, serving
// plain HTTP on Port.
type RouterTarget struct {
	Namespace string
	Selector  string
	Port      int
}

// DefaultRuntimeTarget is sandboxd's default ports and the router `paddock dev up` installs.
func DefaultRuntimeTarget() RuntimeTarget {
	return RuntimeTarget{
		Image: DefaultRuntimeImage, RESTPort: 8080, LegacyPort: 8888,
		Router: RouterTarget{Namespace: "paddock-system", Selector: "app.kubernetes.io/name=paddock-router", Port: 8080},
	}
}

// Runtime is what a runtime scenario measured: sandboxd's round trips one at a time, direct and
// through the router, and the throughput of many concurrent requests each way.
type Runtime struct {
	Sandbox string `json:"sandbox"`
	PodIP   string `json:"podIP"`
	// RouterPod is the router Pod the routed requests went to; empty when none was measured.
	RouterPod string `json:"routerPod,omitempty"`
	// Exec is the SDK's Runtime.Run("true") straight to the sandbox; ExecRouted the same call
	// through the router. Health and HealthRouted are GET /v1/health on sandboxd's REST port.
	// Each routed request follows a direct one, so both see the same machine.
	Exec         Summary `json:"exec"`
	ExecRouted   Summary `json:"execRouted"`
	Health       Summary `json:"health"`
	HealthRouted Summary `json:"healthRouted"`
	// Load and LoadRouted are GET /v1/health from Concurrency clients at once, direct and routed.
	Load       Load `json:"load"`
	LoadRouted Load `json:"loadRouted"`
	// Problems lists what could not be measured and why; the rest of the numbers stand.
	Problems []string `json:"problems,omitempty"`
}

// Load is the outcome of a closed-loop load: Concurrency clients each sending the next request as
// soon as the last one answered, until Requests were sent or the time ran out.
type Load struct {
	Concurrency int `json:"concurrency"`
	Requests    int `json:"requests"`
	// Errors counts requests that failed or did not answer 200.
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
	Latency   Summary `json:"latency"`
}

// AddedSeconds is what the router adds to the median: routed p50 minus direct p50.
func AddedSeconds(direct, routed Summary) float64 { return routed.P50 - direct.P50 }

func (m *Runtime) problem(err error) {
	if err != nil {
		m.Problems = append(m.Problems, err.Error())
	}
}

// runtime measures sandboxd and the router around one real Sandbox. It fails only when the
// sandbox itself cannot be measured; a missing router is a problem recorded in the result.
func (r *Runner) runtime(ctx context.Context, ns string, s Scenario) (Result, error) {
	log := klog.FromContext(ctx)
	rt := r.runtimeTarget
	ip, err := r.startRuntimeSandbox(ctx, ns, s.Timeout)
	if err != nil {
		return Result{}, err
	}
	token, err := r.sandboxToken(ctx, ns)
	if err != nil {
		return Result{}, err
	}
	m := &Runtime{Sandbox: runtimeSandbox, PodIP: ip}
	hc := runtimeHTTPClient(max(s.Concurrency, 1))
	direct := runtimeEndpoints{
		health: "http://" + net.JoinHostPort(ip, strconv.Itoa(rt.RESTPort)) + "/v1/health",
		exec:   sdk.Endpoint{URL: "http://" + net.JoinHostPort(ip, strconv.Itoa(rt.LegacyPort)), HTTPClient: hc, Token: token},
	}
	if err := waitAnswers(ctx, hc, direct.health, nil, s.Timeout); err != nil {
		return Result{}, fmt.Errorf("sandboxd in Sandbox %s/%s does not answer at %s: the harness reaches sandboxes by Pod IP, so run it on a node of the cluster (make bench does), or leave the runtime scenario out with --runtime=0: %w",
			ns, runtimeSandbox, direct.health, err)
	}
	var routed *runtimeEndpoints
	if rt.Router.Selector != "" {
		routed, err = r.routerEndpoints(ctx, ns, hc, m, s.Timeout)
		m.problem(err)
	}
	log.Info("Measuring sandboxd round trips", "sandbox", ip, "router", m.RouterPod, "requests", s.Count)
	deadline, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	m.Exec, m.ExecRouted, err = roundTrips(deadline, s.Count, direct.execOnce(), routed.execOnce())
	if err != nil {
		return Result{}, fmt.Errorf("exec round trips: %w", err)
	}
	m.Health, m.HealthRouted, err = roundTrips(deadline, s.Count, direct.healthOnce(hc), routed.healthOnce(hc))
	if err != nil {
		return Result{}, fmt.Errorf("health round trips: %w", err)
	}
	if s.LoadRequests > 0 {
		log.Info("Measuring throughput", "requests", s.LoadRequests, "concurrency", s.Concurrency)
		m.Load = runLoad(deadline, s.Concurrency, s.LoadRequests, direct.healthOnce(hc))
		if routed != nil {
			m.LoadRouted = runLoad(deadline, s.Concurrency, s.LoadRequests, routed.healthOnce(hc))
		}
	}
	if deadline.Err() != nil {
		m.problem(fmt.Errorf("the scenario's timeout of %s ran out; the numbers cover what was sent before", s.Timeout))
	}
	return Result{Name: s.Name(), Kind: s.Kind, Count: s.Count, Writes: Writes{}, Runtime: m}, nil
}

// sandboxToken reads the scenario Sandbox's token from its credentials Secret, which calls by
// Pod IP present as a client would; none when the controller runs without per-Sandbox
// credentials (no Secret).
func (r *Runner) sandboxToken(ctx context.Context, ns string) (string, error) {
	secret := &corev1.Secret{}
	name := credentials.SandboxSecretName(runtimeSandbox)
	err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the token of Sandbox %s/%s from Secret %s (the harness needs get on secrets in its namespace): %w", ns, runtimeSandbox, name, err)
	}
	return string(secret.Data[credentials.TokenDataKey]), nil
}

// startRuntimeSandbox creates the scenario's Sandbox on a real node and returns its Pod IP once
// it is Ready.
func (r *Runner) startRuntimeSandbox(ctx context.Context, ns string, timeout time.Duration) (string, error) {
	sb := newSandbox(ns, runtimeSandbox, r.runtimeTarget.Image, false)
	// The router reaches only declared ports.
	sb.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{
		{Name: "rest", ContainerPort: int32(r.runtimeTarget.RESTPort)}, {Name: "legacy", ContainerPort: int32(r.runtimeTarget.LegacyPort)}}
	if err := r.c.Create(ctx, sb); err != nil {
		return "", fmt.Errorf("creating Sandbox %s/%s: %w", ns, runtimeSandbox, err)
	}
	var ip string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return false, nil
		}
		if !meta.IsStatusConditionTrue(sb.Status.Conditions, readyCondition) || len(sb.Status.PodIPs) == 0 {
			return false, nil
		}
		ip = sb.Status.PodIPs[0]
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("sandbox %s/%s with image %s was not Ready with a Pod IP within %s (is --runtime-image a sandboxd image the node can pull?): %w",
			ns, runtimeSandbox, r.runtimeTarget.Image, timeout, err)
	}
	return ip, nil
}

// routerEndpoints finds a Ready router Pod and waits until it routes to the scenario's sandbox
// (its Sandbox informer may see the Sandbox a moment after the harness).
func (r *Runner) routerEndpoints(ctx context.Context, ns string, hc *http.Client, m *Runtime, timeout time.Duration) (*runtimeEndpoints, error) {
	rt := r.runtimeTarget
	pod, err := r.readyPod(ctx, rt.Router.Namespace, rt.Router.Selector)
	if err != nil {
		return nil, fmt.Errorf("measuring no router: %w (install dist/paddock-router.yaml, or set --router-namespace and --router-selector; an empty --router-selector leaves the router out)", err)
	}
	base := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(rt.Router.Port))
	token, err := r.routerToken(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("measuring no router: %w", err)
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+token)
	hdr.Set(sdk.HeaderSandboxID, runtimeSandbox)
	hdr.Set(sdk.HeaderSandboxNamespace, ns)
	hdr.Set(sdk.HeaderSandboxPort, strconv.Itoa(rt.RESTPort))
	e := &runtimeEndpoints{
		health: base + "/v1/health", headers: hdr,
		exec: sdk.Endpoint{URL: base, Sandbox: runtimeSandbox, Namespace: ns, Port: rt.LegacyPort, HTTPClient: hc, Token: token},
	}
	if err := waitAnswers(ctx, hc, e.health, hdr, timeout); err != nil {
		return nil, fmt.Errorf("measuring no router: router Pod %s/%s at %s does not route to Sandbox %s/%s: %w", pod.Namespace, pod.Name, base, ns, runtimeSandbox, err)
	}
	m.RouterPod = pod.Name
	return e, nil
}

// routerToken returns a token of a ServiceAccount in ns that may reach the scenario's sandbox
// through a router in its default tokenreview mode (create on sandboxes/proxy).
func (r *Runner) routerToken(ctx context.Context, ns string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-router-client", Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{authz.SandboxAccess.Group}, Resources: []string{authz.SandboxAccess.Resource + "/" + authz.SandboxAccess.Subresource},
		Verbs: []string{authz.SandboxAccess.Verb}, ResourceNames: []string{runtimeSandbox}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := r.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating the router client's %T %s/%s: %w", obj, ns, obj.GetName(), err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := r.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, sa.Name, err)
	}
	return tr.Status.Token, nil
}

// readyPod returns the oldest Ready Pod matching selector in ns that is not being deleted.
func (r *Runner) readyPod(ctx context.Context, ns, selector string) (*corev1.Pod, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", selector, err)
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing Pods %q in %s: %w", selector, ns, err)
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && podReady(p) && p.Status.PodIP != "" && (best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp)) {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no Ready Pod matches %q in namespace %s", selector, ns)
	}
	return best, nil
}

// runtimeEndpoints are the two requests the scenario repeats against one target, direct or
// through the router. A nil *runtimeEndpoints is a target that is not measured.
type runtimeEndpoints struct {
	health  string
	headers http.Header
	exec    sdk.Endpoint
}

// request is one measured round trip.
type request func(context.Context) error

func (e *runtimeEndpoints) healthOnce(hc *http.Client) request {
	if e == nil {
		return nil
	}
	return func(ctx context.Context) error { return getOK(ctx, hc, e.health, e.headers) }
}

func (e *runtimeEndpoints) execOnce() request {
	if e == nil {
		return nil
	}
	rt, err := sdk.NewRuntime(e.exec)
	if err != nil {
		return func(context.Context) error { return err }
	}
	return func(ctx context.Context) error {
		res, err := rt.Run(ctx, "true")
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("`true` exited with %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	}
}

// roundTrips sends n requests of each target one at a time, a direct one then a routed one
// (when routed is not nil), after a warm-up, and summarizes each target's latencies. The first
// failure ends it.
func roundTrips(ctx context.Context, n int, direct, routed request) (Summary, Summary, error) {
	targets := []request{direct}
	if routed != nil {
		targets = append(targets, routed)
	}
	took := make([][]float64, len(targets))
	for i := range runtimeWarmup + n {
		for t, send := range targets {
			start := time.Now()
			if err := send(ctx); err != nil {
				if ctx.Err() != nil && i >= runtimeWarmup {
					break // out of time: keep what was measured
				}
				return Summary{}, Summary{}, fmt.Errorf("request %d (%s): %w", i+1, [...]string{"direct", "routed"}[t], err)
			}
			if i >= runtimeWarmup {
				took[t] = append(took[t], time.Since(start).Seconds())
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	var routedSummary Summary
	if routed != nil {
		routedSummary = Summarize(took[1])
	}
	return Summarize(took[0]), routedSummary, nil
}

// runLoad sends requests from concurrency clients at once until total were sent or ctx ends.
func runLoad(ctx context.Context, concurrency, total int, send request) Load {
	var next, errs atomic.Int64
	latencies := make([][]float64, concurrency)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(total) && ctx.Err() == nil {
				t := time.Now()
				if err := send(ctx); err != nil {
					errs.Add(1)
					continue
				}
				latencies[w] = append(latencies[w], time.Since(t).Seconds())
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var all []float64
	for _, l := range latencies {
		all = append(all, l...)
	}
	sent := len(all) + int(errs.Load())
	return Load{Concurrency: concurrency, Requests: sent, Errors: int(errs.Load()), Seconds: elapsed,
		PerSecond: float64(len(all)) / elapsed, Latency: Summarize(all)}
}

// runtimeHTTPClient keeps a connection per concurrent client alive to each target, and ignores
// proxy environment variables: Pod IPs are reached directly.
func runtimeHTTPClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        4 * concurrency,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// getOK sends GET url with the headers and wants 200; the body is read to the end so the
// connection is reused.
func getOK(ctx context.Context, hc *http.Client, url string, headers http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return nil
}

// waitAnswers polls GET url until it answers 200 or timeout passes, and returns the last error.
func waitAnswers(ctx context.Context, hc *http.Client, url string, headers http.Header, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = getOK(ctx, hc, url, headers)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return errors.Join(last, err)
	}
	return err
}

// runtimeTable renders the runtime scenarios: round trips one at a time, what the router adds to
// the median, and throughput.
func runtimeTable(results []Result) string {
	var b strings.Builder
	for _, s := range results {
		m := s.Runtime
		if m == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| runtime scenario | path | one at a time p50 | p99 | router adds (p50) | requests/s under load | p50 under load | p99 under load | errors |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		}
		// direct is, for a routed path, the direct path it is compared with.
		rows := []struct {
			path            string
			summary, direct Summary
			load            *Load
		}{
			{"exec true (SDK), direct", m.Exec, Summary{}, nil},
			{"exec true (SDK), routed", m.ExecRouted, m.Exec, nil},
			{"GET /v1/health, direct", m.Health, Summary{}, &m.Load},
			{"GET /v1/health, routed", m.HealthRouted, m.Health, &m.LoadRouted},
		}
		for _, row := range rows {
			if row.summary.N == 0 {
				continue
			}
			added := "–"
			if row.direct.N > 0 {
				added = microseconds(AddedSeconds(row.direct, row.summary))
			}
			rate, p50, p99, errs := "–", "–", "–", "–"
			if l := row.load; l != nil && l.Requests > 0 {
				rate, p50, p99, errs = fmt.Sprintf("%.0f", l.PerSecond), microseconds(l.Latency.P50), microseconds(l.Latency.P99), fmt.Sprint(l.Errors)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, row.path,
				microseconds(row.summary.P50), microseconds(row.summary.P99), added, rate, p50, p99, errs)
		}
	}
	for _, s := range results {
		if s.Runtime != nil && len(s.Runtime.Problems) > 0 {
			fmt.Fprintf(&b, "\n%s could not measure everything: %s.\n", s.Name, strings.Join(s.Runtime.Problems, "; "))
		}
	}
	if b.Len() > 0 {
		b.WriteString("\nThe harness sends the runtime requests from the machine it runs on to the sandbox's Pod IP and to the router Pod's IP, with keep-alive connections; each routed round trip follows a direct one. \"Router adds\" is the routed p50 minus the direct p50. Under load, the clients send the next request as soon as the last one answered.\n")
	}
	return b.String()
}

// microseconds formats seconds finely enough for round trips of a fraction of a millisecond.
func microseconds(seconds float64) string {
	switch {
	case seconds < 0:
		return "-" + microseconds(-seconds)
	case seconds < 0.001:
		return fmt.Sprintf("%.0f µs", seconds*1e6)
	case seconds < 0.01:
		return fmt.Sprintf("%.2f ms", seconds*1e3)
	default:
		return latency(1, seconds)
	}
}
