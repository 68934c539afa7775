package framework

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Readiness is what SandboxReadiness makes of a Sandbox.
type Readiness int

const (
	// Ready means Ready=True/DependenciesReady with a pod IP, as a running, ready Pod would give.
	Ready Readiness = iota
	// Pending means the Sandbox is left alone, as a Pod that has not started.
	Pending
	// Unschedulable means Ready=False and PodScheduled=False/Unschedulable, as a Pod no node fits.
	Unschedulable
)

// SandboxReadiness stands in for the Sandbox controller and the kubelet in tests of the
// extensions controllers: it writes the status a Sandbox with a ready Pod would have. Swap it
// for the real Sandbox controller plus a pod-readiness helper once both run in tests.
type SandboxReadiness struct {
	decide atomic.Pointer[func(*agentsv1beta1.Sandbox) Readiness]
	ips    atomic.Uint32
	cancel context.CancelFunc
	done   chan struct{}
}

// StartSandboxReadiness starts the stand-in in its own manager. Every Sandbox becomes Ready
// until SetDecision says otherwise.
func StartSandboxReadiness(e *Env) (*SandboxReadiness, error) {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:     e.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the readiness stand-in's manager: %w", err)
	}
	s := &SandboxReadiness{done: make(chan struct{})}
	s.SetDecision(nil)
	if err := ctrl.NewControllerManagedBy(mgr).For(&agentsv1beta1.Sandbox{}).Named("test-sandbox-readiness").
		WithOptions(controllerOptions(8)).Complete(&readinessReconciler{c: mgr.GetClient(), s: s}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = mgr.Start(ctx)
	}()
	return s, nil
}

// SetDecision sets what becomes of each Sandbox from now on; nil makes every Sandbox Ready.
// Sandboxes already handled keep their status.
func (s *SandboxReadiness) SetDecision(decide func(*agentsv1beta1.Sandbox) Readiness) {
	if decide == nil {
		decide = func(*agentsv1beta1.Sandbox) Readiness { return Ready }
	}
	s.decide.Store(&decide)
}

// Stop stops the stand-in.
func (s *SandboxReadiness) Stop() {
	s.cancel()
	<-s.done
}

type readinessReconciler struct {
	c client.Client
	s *SandboxReadiness
}

func (r *readinessReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := r.c.Get(ctx, req.NamespacedName, sb); err != nil || !sb.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := sb.DeepCopy()
	switch (*r.s.decide.Load())(sb) {
	case Pending:
		return ctrl.Result{RequeueAfter: pollInterval * 4}, nil // the decision may change
	case Unschedulable:
		setCond(sb, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod exists with phase: Pending")
		setCond(sb, agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionFalse, corev1.PodReasonUnschedulable, "0/1 nodes are available")
	case Ready:
		if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			return ctrl.Result{}, nil
		}
		n := r.s.ips.Add(1)
		sb.Status.PodIPs = []string{fmt.Sprintf("198.18.%d.%d", (n>>8)&0xff, n&0xff)}
		setCond(sb, agentsv1beta1.SandboxConditionPodScheduled, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled, "")
		setCond(sb, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, "Pod is Ready")
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.c.Status().Patch(ctx, sb, client.MergeFrom(orig)))
}

func setCond(sb *agentsv1beta1.Sandbox, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: sb.Generation})
}

func controllerOptions(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers}
}
