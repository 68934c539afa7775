package sandbox

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/naming"
)

type cond struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

func ownedPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func running(ready bool, ips ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status})
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
}

func scheduled(status corev1.ConditionStatus, reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, Message: msg})
	}
}

// lastTerminated records that the container's last run exited with code and message.
func lastTerminated(container string, code int32, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: message}}})
	}
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }

var svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns"}}

func TestComputeStatusConditions(t *testing.T) {
	suspendedSB := func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended }
	withService := func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) }
	notSuspended := &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended, msgNotSuspended}
	tests := []struct {
		name                           string
		sb                             *agentsv1beta1.Sandbox
		obs                            observation
		ready, suspended, sched, finis *cond
	}{
		{
			name:      "no pod yet",
			sb:        sandbox(),
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod does not exist"},
			suspended: notSuspended,
		},
		{
			name:      "pending pod without scheduling information",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod exists with phase: Pending"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "unschedulable pod: reason and message pass through",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(scheduled(corev1.ConditionFalse, "Unschedulable", "0/3 nodes")), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod exists with phase: Pending"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionFalse, "Unschedulable", "0/3 nodes"},
		},
		{
			name:      "scheduled without a reason gets one",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(scheduled(corev1.ConditionTrue, "", ""), running(false)), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod is Running but not Ready"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled, ""},
		},
		{
			name:      "ready without IPs",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(running(true)), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod is Ready but has no podIPs yet"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "ready, service required but missing",
			sb:        sandbox(withService),
			obs:       observation{pod: ownedPod(running(true, "198.19.0.1"), scheduled(corev1.ConditionTrue, "", "")), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod is Ready; Service does not exist"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled, ""},
		},
		{
			name:      "ready with service",
			sb:        sandbox(withService),
			obs:       observation{pod: ownedPod(running(true, "198.19.0.1"), scheduled(corev1.ConditionTrue, "", "")), podOwned: true, service: svc},
			ready:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, "Pod is Ready; Service Exists"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled, ""},
		},
		{
			name:      "kept service counts when spec.service is unset",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(running(true, "198.19.0.1")), podOwned: true, service: svc},
			ready:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, "Pod is Ready; Service Exists"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name: "ready but terminating: resumed while the suspended Pod drains",
			sb:   sandbox(),
			obs: observation{pod: ownedPod(running(true, "198.19.0.1"), scheduled(corev1.ConditionTrue, "", ""),
				func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, msgPodDraining},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodScheduled, ""},
		},
		{
			name:      "succeeded",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(phase(corev1.PodSucceeded)), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodSucceeded, msgPodSucceeded},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
			finis:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodSucceeded, msgPodSucceeded},
		},
		{
			name:      "failed",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(phase(corev1.PodFailed)), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
			finis:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
		},
		{
			name:      "errors win over everything",
			sb:        sandbox(suspendedSB),
			obs:       observation{pod: ownedPod(phase(corev1.PodFailed)), podOwned: true, errs: []error{errors.New("boom"), errors.New("bang")}},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError, "Error seen: boom\nbang"},
			suspended: &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodTerminating, msgPodTerminating},
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
			finis:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
		},
		{
			name: "injected sandboxd's preflight failed: its termination message, without the prefix",
			sb:   sandbox(),
			obs: observation{pod: ownedPod(running(false, "198.19.0.1"), lastTerminated("app", sandboxd.PreflightExitCode, sandboxd.PreflightMessagePrefix+"the image has no /bin/bash (fix: x)")),
				podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonImageIncompatible, `container "app" cannot host sandboxd: the image has no /bin/bash (fix: x)`},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "incompatibility also on a Pod that failed for good (restartPolicy Never)",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(phase(corev1.PodFailed), lastTerminated("app", sandboxd.PreflightExitCode, sandboxd.PreflightMessagePrefix+"root")), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonImageIncompatible, `container "app" cannot host sandboxd: root`},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
			finis:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
		},
		{
			name:      "another exit with that message, or that code without it, is not a preflight",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(running(false), lastTerminated("a", 1, sandboxd.PreflightMessagePrefix+"x"), lastTerminated("b", sandboxd.PreflightExitCode, "x")), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod is Running but not Ready"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name: "the kubelet refuses a root image under runAsNonRoot",
			sb:   sandbox(),
			obs: observation{pod: ownedPod(func(p *corev1.Pod) {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root (pod: \"sb_ns(1)\", container: app)"}}})
			}), podOwned: true},
			ready: &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonImageIncompatible,
				`container "app": container has runAsNonRoot and image will run as root (pod: "sb_ns(1)", container: app) (fix: set securityContext.runAsUser to a non-root uid such as 1000 in the template's pod spec, or use an image whose USER is a non-root uid)`},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "a Ready Pod is Ready whatever an earlier run said",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(running(true, "198.19.0.1"), lastTerminated("app", sandboxd.PreflightExitCode, sandboxd.PreflightMessagePrefix+"x")), podOwned: true},
			ready:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, "Pod is Ready"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "an injection the template cannot have",
			sb:        sandbox(),
			obs:       observation{errs: []error{reconcile.TerminalError(fmt.Errorf("%w: no image", blueprint.ErrSandboxdInjection))}},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonInjectionInvalid, "cannot inject sandboxd: no image"},
			suspended: notSuspended,
		},
		{
			name:      "multiple pods",
			sb:        sandbox(),
			obs:       observation{podUnknown: true, multiplePods: &multiplePodsError{n: 2}},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonMultiplePods, (&multiplePodsError{n: 2}).Error()},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingUnknown},
		},
		{
			name:      "multiple pods while suspended",
			sb:        sandbox(suspendedSB),
			obs:       observation{podUnknown: true, multiplePods: &multiplePodsError{n: 3}},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonMultiplePods, (&multiplePodsError{n: 3}).Error()},
			suspended: &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodStateUnknown, msgSuspendUnknown},
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingUnknown},
		},
		{
			name:      "suspended, owned pod still there",
			sb:        sandbox(suspendedSB),
			obs:       observation{pod: ownedPod(running(true, "198.19.0.1")), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended, msgSuspending},
			suspended: &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodTerminating, msgPodTerminating},
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name:      "suspended, foreign pod",
			sb:        sandbox(suspendedSB),
			obs:       observation{pod: ownedPod()},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended, msgSuspending},
			suspended: &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodNotOwned, msgPodNotOwned},
		},
		{
			name: "pod rejected at admission and deleted: waiting for the next",
			sb:   sandbox(),
			obs: observation{rejection: &podRejection{podUID: "u1", pod: "sb", node: "node-a", reason: "OutOfmemory",
				message: "Pod was rejected: Node didn't have enough resource: memory", count: 2, retryAt: time.Date(2026, 12, 3, 8, 30, 1, 0, time.UTC)}},
			ready: &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodRejected,
				`Pod "sb" was rejected at admission by node "node-a" (OutOfmemory: Pod was rejected: Node didn't have enough resource: memory); a new Pod follows at 2026-12-03T08:30:01Z (rejections in a row: 2)`},
			suspended: notSuspended,
		},
		{
			name:      "pod rejected at admission, not deleted yet: not finished",
			sb:        sandbox(),
			obs:       observation{pod: ownedPod(phase(corev1.PodFailed), func(p *corev1.Pod) { p.Status.Reason = "OutOfcpu" }), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonDependenciesNotReady, "Pod exists with phase: Failed"},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
		},
		{
			name: "pod ran, then failed with an admission reason: finished",
			sb:   sandbox(),
			obs: observation{pod: ownedPod(phase(corev1.PodFailed), func(p *corev1.Pod) {
				p.Status.Reason = "OutOfcpu"
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: metav1.Unix(1, 0)}}}}
			}), podOwned: true},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
			suspended: notSuspended,
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingNotReport},
			finis:     &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodFailed, msgPodFailed},
		},
		{
			name:      "suspended, pod gone",
			sb:        sandbox(suspendedSB),
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended, msgSuspended},
			suspended: &cond{metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated, msgPodTerminated},
		},
		{
			name:      "suspended, pod lookup failed",
			sb:        sandbox(suspendedSB),
			obs:       observation{podUnknown: true, errs: []error{errors.New("cache down")}},
			ready:     &cond{metav1.ConditionFalse, agentsv1beta1.SandboxReasonReconcilerError, "Error seen: cache down"},
			suspended: &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodStateUnknown, msgSuspendUnknown},
			sched:     &cond{metav1.ConditionUnknown, agentsv1beta1.SandboxReasonPodSchedulingUnknown, msgSchedulingUnknown},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Start from stale conditions to prove every owned condition is set or removed.
			tt.sb.Status.Conditions = []metav1.Condition{
				{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue, Reason: "Stale"},
				{Type: agentsv1beta1.SandboxConditionPodScheduled, Status: metav1.ConditionTrue, Reason: "Stale"},
			}
			computeStatus(tt.sb, &tt.obs, "cluster.local")
			want := map[string]*cond{
				agentsv1beta1.SandboxConditionReady: tt.ready, agentsv1beta1.SandboxConditionSuspended: tt.suspended,
				agentsv1beta1.SandboxConditionPodScheduled: tt.sched, agentsv1beta1.SandboxConditionFinished: tt.finis,
			}
			got := map[string]*cond{}
			for _, c := range tt.sb.Status.Conditions {
				got[c.Type] = &cond{c.Status, c.Reason, c.Message}
				if c.ObservedGeneration != tt.sb.Generation && c.Reason != "Stale" {
					t.Errorf("%s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, tt.sb.Generation)
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(_ string, v *cond) bool { return v == nil })); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeStatusFields(t *testing.T) {
	sel := agentsv1beta1.SandboxNameHashLabel + "=" + naming.NameHash("sb")
	bound := ownedPod(running(true, "198.19.0.1", "fd00::1"), func(p *corev1.Pod) { p.Spec.NodeName = "node-a" })
	previous := agentsv1beta1.SandboxStatus{Service: "old", ServiceFQDN: "old.ns.svc.x", LabelSelector: sel, PodIPs: []string{"198.19.0.9"}, NodeName: "n"}
	tests := []struct {
		name string
		obs  observation
		want agentsv1beta1.SandboxStatus
	}{
		{
			name: "owned pod and service",
			obs:  observation{pod: bound, podOwned: true, service: svc},
			want: agentsv1beta1.SandboxStatus{Service: "sb", ServiceFQDN: "sb.ns.svc.example.test", LabelSelector: sel,
				PodIPs: []string{"198.19.0.1", "fd00::1"}, NodeName: "node-a"},
		},
		{
			name: "foreign pod: selector, no addresses",
			obs:  observation{pod: bound},
			want: agentsv1beta1.SandboxStatus{LabelSelector: sel},
		},
		{
			name: "no pod: selector kept from before, service cleared",
			obs:  observation{},
			want: agentsv1beta1.SandboxStatus{LabelSelector: sel},
		},
		{
			name: "service not looked at: service fields untouched",
			obs:  observation{podUnknown: true, multiplePods: &multiplePodsError{n: 2}, serviceSkipped: true},
			want: agentsv1beta1.SandboxStatus{Service: "old", ServiceFQDN: "old.ns.svc.x", LabelSelector: sel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := sandbox()
			sb.Status = *previous.DeepCopy()
			setChildFields(sb, &tt.obs, "example.test")
			if diff := cmp.Diff(tt.want, sb.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnlyNodeNameChanged(t *testing.T) {
	base := agentsv1beta1.SandboxStatus{PodIPs: []string{"198.19.0.1"}, Conditions: []metav1.Condition{{Type: "Ready", Status: "False"}}}
	withNode := *base.DeepCopy()
	withNode.NodeName = "n"
	withNodeAndIP := *withNode.DeepCopy()
	withNodeAndIP.PodIPs = nil
	for _, tt := range []struct {
		name          string
		status, prior agentsv1beta1.SandboxStatus
		want          bool
	}{
		{"nothing changed", base, base, false},
		{"only nodeName", withNode, base, true},
		{"nodeName and more", withNodeAndIP, base, false},
		{"something else only", withNodeAndIP, withNode, false},
	} {
		if got := onlyNodeNameChanged(&tt.status, &tt.prior); got != tt.want {
			t.Errorf("%s: onlyNodeNameChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
}
