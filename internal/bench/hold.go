package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Controller locates the controller under test through the API: the Pods matching Selector in
// Namespace, whose Prometheus endpoint listens on MetricsPort (HTTPS, read from the Pod's address
// with the kubeconfig's token). Nothing in it is specific to Paddock.
type Controller struct {
	Namespace   string
	Selector    string
	MetricsPort int
	// Deployment is the controller's Deployment in Namespace, whose first container's image
	// --compare swaps.
	Deployment string
}

// holdCreators is how many creates of a hold scenario are in flight at once; thousands of
// goroutines each waiting on the API server would measure the harness's own queueing.
const holdCreators = 50

// holdIdleWindow is how long the held objects are watched, idle, for the controller's CPU.
const holdIdleWindow = 10 * time.Second

// metricsPoll paces reads of the controller's metrics while waiting for a resync.
const metricsPoll = 250 * time.Millisecond

// Hold is what a hold scenario measured beyond the common fields: the controller's footprint
// with Count objects held, and how long it took to catch up after a restart.
type Hold struct {
	ControllerPod string `json:"controllerPod,omitempty"`
	// Settled is the controller's state once it had nothing queued after the creates.
	Settled ControllerMetrics `json:"settled"`
	// CPUCoresCreating is the controller's CPU use (cores) from the first create to all Ready;
	// CPUCoresIdle over holdIdleWindow afterwards, with nothing changing.
	CPUCoresCreating float64 `json:"cpuCoresCreating"`
	CPUCoresIdle     float64 `json:"cpuCoresIdle"`
	// The restart, each measured from the delete call of the controller's Pod: until a new Pod
	// is Ready, until a probe Sandbox created when it is Ready is Ready itself, and until the
	// new process has queued at least Count items and has nothing queued or in flight (a full
	// resync). ResyncComplete is false when that did not happen within the scenario's timeout.
	// ProcessStartedSeconds is when the new process started (its process_start_time_seconds, so
	// on the controller's clock), which the Pod's readiness probe period does not blur.
	ProcessStartedSeconds float64           `json:"processStartedSeconds,omitempty"`
	PodReadySeconds       float64           `json:"podReadySeconds"`
	ProbeReadySeconds     float64           `json:"probeReadySeconds"`
	ResyncSeconds         float64           `json:"resyncSeconds"`
	ResyncComplete        bool              `json:"resyncComplete"`
	AfterResync           ControllerMetrics `json:"afterResync"`
	// Problems lists what could not be measured and why; the rest of the numbers stand.
	Problems []string `json:"problems,omitempty"`
}

// ControllerMetrics reads the metrics of the controller Pod pod from its address: the
// controller serves them over HTTPS (self-signed) to a token allowed get on /metrics
// (--metrics-secure), which the API server's pod proxy cannot present, so the harness dials the
// Pod with the kubeconfig's token.
func (r *Runner) ControllerMetrics(ctx context.Context, pod string) (ControllerMetrics, error) {
	p := &corev1.Pod{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.controller.Namespace, Name: pod}, p); err != nil {
		return ControllerMetrics{}, err
	}
	if p.Status.PodIP == "" {
		return ControllerMetrics{}, fmt.Errorf("controller Pod %s/%s has no IP yet", r.controller.Namespace, pod)
	}
	if r.token == "" {
		return ControllerMetrics{}, errors.New("the kubeconfig has no bearer token to present to the controller's /metrics (--metrics-secure)")
	}
	url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(r.controller.MetricsPort)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ControllerMetrics{}, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	// The controller's serving certificate is self-signed; the token goes only to the Pod the
	// API server named.
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed, see above
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return ControllerMetrics{}, fmt.Errorf("reading metrics of controller Pod %s/%s at %s (check --controller-metrics-port): %w", r.controller.Namespace, pod, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ControllerMetrics{}, fmt.Errorf("reading metrics of controller Pod %s/%s at %s: %s (the kubeconfig's identity needs get on /metrics, ClusterRole paddock-metrics-reader)",
			r.controller.Namespace, pod, url, resp.Status)
	}
	return ParseControllerMetrics(resp.Body)
}

// controllerPod returns the name and UID of the Ready controller Pod that is not being deleted;
// with several (an HA controller), the oldest.
func (r *Runner) controllerPod(ctx context.Context) (string, types.UID, error) {
	sel, err := labels.Parse(r.controller.Selector)
	if err != nil {
		return "", "", fmt.Errorf("--controller-selector %q: %w", r.controller.Selector, err)
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(r.controller.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", "", fmt.Errorf("listing controller Pods: %w", err)
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && podReady(p) && (best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp)) {
			best = p
		}
	}
	if best == nil {
		return "", "", fmt.Errorf("no Ready controller Pod matches %q in namespace %s (check --controller-namespace and --controller-selector)", r.controller.Selector, r.controller.Namespace)
	}
	return best.Name, best.UID, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hold creates s.Count Sandboxes, waits for them, measures the controller with them held,
// restarts it and measures the resync.
func (r *Runner) hold(ctx context.Context, ns string, s Scenario) (Result, error) {
	if r.onKWOK {
		if err := r.waitKWOKRoom(ctx, s.Count+1, s.Timeout); err != nil {
			return Result{}, err
		}
	}
	tr := newTracker(s.Count)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchReady(watchCtx, r.c, &agentsv1beta1.SandboxList{}, ns, tr); err != nil {
		return Result{}, err
	}
	h := &Hold{}
	pod, _, err := r.controllerPod(ctx)
	if err != nil {
		return Result{}, err
	}
	h.ControllerPod = pod
	cpuBefore, metricsErr := r.ControllerMetrics(ctx, pod)
	h.problem(metricsErr)
	before, err := r.Writes(ctx)
	if err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	r.createBounded(ctx, ns, s, tr)
	waitCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	tr.wait(waitCtx)
	cancel()
	res := result(s, t0, tr)
	after, err := r.Writes(ctx)
	if err != nil {
		return Result{}, err
	}
	res.Writes = after.Sub(before)
	res.WritesPerClaim = res.Writes.Total() / float64(s.Count)
	if metricsErr == nil {
		r.measureHeld(ctx, h, cpuBefore, time.Since(t0), s.Timeout)
	}
	r.restart(ctx, ns, s, h)
	res.Hold = h
	return res, nil
}

// createBounded creates the Sandboxes with holdCreators creates in flight.
func (r *Runner) createBounded(ctx context.Context, ns string, s Scenario, tr *tracker) {
	names := make(chan string)
	var wg sync.WaitGroup
	for range holdCreators {
		wg.Go(func() {
			for name := range names {
				tr.start(name, time.Now())
				if err := r.c.Create(ctx, newSandbox(ns, name, r.image, r.onKWOK)); err != nil {
					tr.fail(name, err)
				}
			}
		})
	}
	for i := range s.Count {
		select {
		case names <- objectName("sb", i):
		case <-ctx.Done():
		}
	}
	close(names)
	wg.Wait()
}

// measureHeld waits until the controller has nothing queued, then reads its memory, and its CPU
// over an idle window.
func (r *Runner) measureHeld(ctx context.Context, h *Hold, cpuBefore ControllerMetrics, creating, timeout time.Duration) {
	var m ControllerMetrics
	err := wait.PollUntilContextTimeout(ctx, metricsPoll, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		m, err = r.ControllerMetrics(ctx, h.ControllerPod)
		return err == nil && m.Idle(), nil
	})
	if err != nil {
		h.problem(fmt.Errorf("the controller still had work queued %s after the creates; memory read anyway", timeout))
	}
	h.Settled = m
	h.CPUCoresCreating = (m.CPUSeconds - cpuBefore.CPUSeconds) / creating.Seconds()
	start := time.Now()
	select {
	case <-ctx.Done():
		return
	case <-time.After(holdIdleWindow):
	}
	idle, err := r.ControllerMetrics(ctx, h.ControllerPod)
	if err != nil {
		h.problem(err)
		return
	}
	h.CPUCoresIdle = (idle.CPUSeconds - m.CPUSeconds) / time.Since(start).Seconds()
}

// restart deletes the controller Pod, creates a probe Sandbox at once, and times the new Pod's
// readiness, the probe's readiness and the new process's full resync, all from the delete.
func (r *Runner) restart(ctx context.Context, ns string, s Scenario, h *Hold) {
	log := klog.FromContext(ctx)
	name, uid, err := r.controllerPod(ctx)
	if err != nil {
		h.problem(err)
		return
	}
	probe := newTracker(1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := watchReady(watchCtx, r.c, &agentsv1beta1.SandboxList{}, ns, probe); err != nil {
		h.problem(err)
		return
	}
	t0 := time.Now()
	err = r.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.controller.Namespace, Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		h.problem(fmt.Errorf("deleting controller Pod %s to restart it: %w", name, err))
		return
	}
	log.Info("Deleted the controller Pod; waiting for the resync", "pod", name)
	deadline, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	const probeName = "probe"
	newPod, err := r.awaitResync(deadline, s.Count, uid, t0, h, func() {
		// Created only once the new Pod is Ready: the old process serves until it exits, and
		// would answer a probe created right after the delete without any restart in between.
		probe.start(probeName, time.Now())
		if err := r.c.Create(ctx, newSandbox(ns, probeName, r.image, r.onKWOK)); err != nil {
			probe.fail(probeName, err)
			h.problem(fmt.Errorf("creating the probe Sandbox: %w", err))
		}
	})
	if err != nil {
		h.problem(fmt.Errorf("no full resync within %s of the restart (new Pod %q): %w", s.Timeout, newPod, err))
	}
	probe.wait(deadline)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if at, ok := probe.ready[probeName]; ok {
		h.ProbeReadySeconds = at.Sub(t0).Seconds()
	} else {
		h.problem(errors.New("the probe Sandbox created after the restart was not Ready in time"))
	}
}

// awaitResync polls until a controller Pod other than oldUID is Ready (then calls onReady once)
// and its process has queued at least count items and has nothing queued or in flight. It
// records both times since t0 in h and returns the new Pod's name.
func (r *Runner) awaitResync(ctx context.Context, count int, oldUID types.UID, t0 time.Time, h *Hold, onReady func()) (string, error) {
	newPod := ""
	err := wait.PollUntilContextCancel(ctx, metricsPoll, true, func(ctx context.Context) (bool, error) {
		if newPod == "" {
			p, id, err := r.controllerPod(ctx)
			if err != nil || id == oldUID {
				return false, nil
			}
			newPod, h.PodReadySeconds = p, time.Since(t0).Seconds()
			onReady()
		}
		m, err := r.ControllerMetrics(ctx, newPod)
		if err == nil && !m.HasWorkqueueStats {
			return false, errors.New("the controller exports no workqueue metrics, so only the probe times the resync")
		}
		if err != nil || m.QueueAdds < float64(count) || !m.Idle() {
			return false, nil
		}
		h.ResyncSeconds, h.ResyncComplete, h.AfterResync = time.Since(t0).Seconds(), true, m
		if m.StartTimeSeconds > 0 {
			h.ProcessStartedSeconds = m.StartTimeSeconds - float64(t0.UnixNano())/1e9
		}
		return true, nil
	})
	return newPod, err
}

func (h *Hold) problem(err error) {
	if err != nil {
		h.Problems = append(h.Problems, err.Error())
	}
}

// waitKWOKRoom waits until the KWOK nodes can take count more Pods: fake nodes still have a
// Pod capacity, and Pods of earlier scenarios may still be on their way out.
func (r *Runner) waitKWOKRoom(ctx context.Context, count int, timeout time.Duration) error {
	room := 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		room, err = r.kwokRoom(ctx)
		return err == nil && room >= count, nil
	})
	if err != nil {
		return fmt.Errorf("the KWOK nodes have room for %d more Pods, the hold scenario needs %d (its Sandboxes and a probe); add KWOK nodes or room on them (paddock dev up --kwok-nodes, --kwok-max-pods; 110 Pods per node by default) or lower --hold", room, count)
	}
	return nil
}

// kwokRoom is the KWOK nodes' allocatable Pods minus the Pods bound to them.
func (r *Runner) kwokRoom(ctx context.Context) (int, error) {
	nodes := &corev1.NodeList{}
	if err := r.c.List(ctx, nodes, client.MatchingLabels{kwokNodeLabelKey: kwokNodeLabelValue}); err != nil {
		return 0, err
	}
	room, kwok := 0, map[string]bool{}
	for _, n := range nodes.Items {
		kwok[n.Name] = true
		room += int(n.Status.Allocatable.Pods().Value())
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods); err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if kwok[p.Spec.NodeName] {
			room--
		}
	}
	return room, nil
}
