package idle

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/controller/idle"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const timeout = 10 * time.Minute

type harness struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	clock  *clocktesting.FakeClock
	daemon *fakeDaemon
	events *events.FakeRecorder
}

func newHarness(t *testing.T) *harness {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	return &harness{t: t, ctx: framework.Context(t, 3*time.Minute), ns: ns, clock: newClock(), daemon: &fakeDaemon{}, events: events.NewFakeRecorder(10)}
}

// reconciler builds the idle reconciler as the manager does, on the shared clock and daemon. A
// second call is a controller restart: nothing carries over but what the API server holds.
func (h *harness) reconciler() *idle.Reconciler {
	return idle.New(env.Client, h.events, idle.WithClock(h.clock), idle.WithActivitySource(h.daemon), idle.WithExtensions(true))
}

func (h *harness) pass(r *idle.Reconciler, sb *agentsv1beta1.Sandbox) ctrl.Result {
	h.t.Helper()
	for {
		res, err := r.Reconcile(h.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
		switch {
		case apierrors.IsConflict(err):
			continue // raced the Sandbox controller's own write; the manager would retry too
		case err != nil:
			h.t.Fatalf("idle pass over %s: %v", sb.Name, err)
		}
		return res
	}
}

func (h *harness) get(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	h.t.Helper()
	got := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(h.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
		h.t.Fatal(err)
	}
	return got
}

// readySandbox creates sb and waits until the Sandbox controller reports it Ready.
func (h *harness) readySandbox(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	h.t.Helper()
	framework.MustCreate(h.t, h.ctx, env.Client, sb)
	framework.Eventually(h.t, func(ctx context.Context) error {
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
			return fmt.Errorf("not Ready yet: %s", builder.FormatConditions(got.Status.Conditions))
		}
		return nil
	})
	return h.get(sb)
}

// started is a Ready Sandbox with a 10m timeout whose idle clock the reconciler has started.
func (h *harness) started(name string, r *idle.Reconciler) *agentsv1beta1.Sandbox {
	h.t.Helper()
	sb := h.readySandbox(builder.MakeSandbox(name, h.ns).Annotation(agentsv1beta1.IdleTimeoutAnnotation, timeout.String()).Obj())
	if res := h.pass(r, sb); res.RequeueAfter != timeout {
		h.t.Fatalf("first pass: requeue after %v, want the timeout %v", res.RequeueAfter, timeout)
	}
	got := h.get(sb)
	if _, ok := got.Annotations[agentsv1beta1.LastActivityAnnotation]; !ok {
		h.t.Fatalf("first pass did not start the idle clock: annotations %v", got.Annotations)
	}
	return got
}

func suspendedForIdle(sb *agentsv1beta1.Sandbox) bool {
	return sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended &&
		sb.Annotations[agentsv1beta1.SuspendReasonAnnotation] == agentsv1beta1.SuspendReasonIdle
}

func TestIdleSandboxIsSuspended(t *testing.T) {
	h := newHarness(t)
	r := h.reconciler()
	sb := h.started("nap", r)

	h.clock.Step(timeout / 2)
	if res := h.pass(r, sb); res.RequeueAfter <= 0 || suspendedForIdle(h.get(sb)) {
		t.Fatalf("half-way through the timeout: requeue %v, suspended %v; want a requeue and no suspension", res.RequeueAfter, suspendedForIdle(h.get(sb)))
	}
	h.clock.Step(timeout)
	h.pass(r, sb)
	if got := h.get(sb); !suspendedForIdle(got) {
		t.Fatalf("after the timeout: operatingMode %q, annotations %v; want Suspended for Idle", got.Spec.OperatingMode, got.Annotations)
	}
	framework.Eventually(t, func(context.Context) error {
		got := h.get(sb)
		c := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionSuspended)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != agentsv1beta1.SandboxReasonIdle {
			return fmt.Errorf("Suspended condition %+v, want True with reason Idle", c)
		}
		return nil
	})
	select {
	case e := <-h.events.Events:
		if want := "Normal " + idle.EventIdle; len(e) < len(want) || e[:len(want)] != want {
			t.Errorf("event %q, want one starting %q", e, want)
		}
	default:
		t.Errorf("no event emitted for the idle suspension")
	}
}

func TestEachActivityPostponesIdling(t *testing.T) {
	for _, tc := range []struct {
		name string
		// act makes the activity happen at now.
		act func(h *harness, sb *agentsv1beta1.Sandbox, now time.Time)
	}{
		{name: "a sandboxd call or keepalive", act: func(h *harness, _ *agentsv1beta1.Sandbox, now time.Time) {
			h.daemon.set(&sandboxd.Activity{LastActivity: now})
		}},
		{name: "an open stream", act: func(h *harness, _ *agentsv1beta1.Sandbox, now time.Time) {
			h.daemon.set(&sandboxd.Activity{LastActivity: now.Add(-time.Hour), Streams: 1})
		}},
		{name: "a request through the router", act: func(h *harness, sb *agentsv1beta1.Sandbox, now time.Time) {
			// What the router writes, at most once a minute per Sandbox.
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, agentsv1beta1.LastActivityAnnotation, activity.Format(now))
			if err := env.Client.Patch(h.ctx, sb, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				h.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.reconciler()
			sb := h.started("busy", r)
			h.clock.Step(timeout / 2)
			tc.act(h, sb, h.clock.Now())
			h.clock.Step(timeout/2 + time.Minute) // the timeout since the start has run out
			if res := h.pass(r, sb); res.RequeueAfter <= 0 || suspendedForIdle(h.get(sb)) {
				t.Fatalf("with activity half-way: requeue %v, suspended %v; want a requeue and no suspension", res.RequeueAfter, suspendedForIdle(h.get(sb)))
			}
			h.daemon.set(&sandboxd.Activity{LastActivity: h.clock.Now().Add(-time.Hour)}) // the stream ends long ago
			if tc.name == "an open stream" {
				h.daemon.set(&sandboxd.Activity{LastActivity: h.clock.Now()})
			}
			h.clock.Step(timeout)
			h.pass(r, sb)
			if got := h.get(sb); !suspendedForIdle(got) {
				t.Fatalf("a timeout after the activity: operatingMode %q; want Suspended for Idle", got.Spec.OperatingMode)
			}
		})
	}
}

func TestLongRunningProcessPreventsIdling(t *testing.T) {
	h := newHarness(t)
	r := h.reconciler()
	sb := h.started("long", r)
	h.daemon.set(&sandboxd.Activity{LastActivity: h.clock.Now(), Processes: 1})
	writes := 0
	for i := range 5 {
		h.clock.Step(timeout + time.Minute)
		before := h.get(sb).ResourceVersion
		h.pass(r, sb)
		got := h.get(sb)
		if suspendedForIdle(got) || got.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
			t.Fatalf("pass %d: suspended while a quiet command runs", i)
		}
		if got.ResourceVersion != before {
			writes++
		}
	}
	// One write per timeout at most while the command runs: the activity is recorded, not polled.
	if writes > 5 {
		t.Errorf("%d writes in 5 timeouts with a running command, want at most 5", writes)
	}
	h.daemon.set(&sandboxd.Activity{LastActivity: h.clock.Now()}) // the command ends now
	h.clock.Step(timeout)
	h.pass(r, sb)
	if !suspendedForIdle(h.get(sb)) {
		t.Fatalf("a timeout after the command ended: not suspended")
	}
}

func TestIdleSandboxWithoutActivityCostsNoWrites(t *testing.T) {
	h := newHarness(t)
	r := h.reconciler()
	sb := h.started("quiet", r)
	h.daemon.set(&sandboxd.Activity{LastActivity: h.clock.Now().Add(-time.Hour)})
	rv := h.get(sb).ResourceVersion
	for range 10 {
		h.clock.Step(timeout / 20)
		h.pass(r, sb)
	}
	if got := h.get(sb); got.ResourceVersion != rv {
		t.Fatalf("an idle Sandbox was written during its timeout: resourceVersion %s → %s, annotations %v", rv, got.ResourceVersion, got.Annotations)
	}
}

func TestPolicyOverridesAndSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	tpl := builder.MakeTemplate("tpl", h.ns).Image("busybox").Annotation(agentsv1beta1.IdleTimeoutAnnotation, "30m").
		Annotation(agentsv1beta1.WakeOnRequestAnnotation, "false").Obj()
	framework.MustCreate(t, h.ctx, env.Client, tpl)
	claim := builder.MakeClaim("c", h.ns, "pool").Annotation(agentsv1beta1.IdleTimeoutAnnotation, "5m").Obj()
	framework.MustCreate(t, h.ctx, env.Client, claim)
	claimGVK := schema.GroupVersionKind{Group: extensionsv1beta1.GroupVersion.Group, Version: extensionsv1beta1.GroupVersion.Version, Kind: "SandboxClaim"}
	fromTemplate := builder.MakeSandbox("from-template", h.ns).Annotation(agentsv1beta1.SandboxTemplateRefAnnotation, tpl.Name)
	for _, tc := range []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want activity.Policy
	}{
		{name: "template", sb: fromTemplate.Obj(), want: activity.Policy{Timeout: 30 * time.Minute}},
		{name: "claim over template", sb: builder.MakeSandbox("from-claim", h.ns).Annotation(agentsv1beta1.SandboxTemplateRefAnnotation, tpl.Name).
			ControlledBy(claim, claimGVK).Obj(), want: activity.Policy{Timeout: 5 * time.Minute}},
		{name: "sandbox over claim", sb: builder.MakeSandbox("own", h.ns).Annotation(agentsv1beta1.SandboxTemplateRefAnnotation, tpl.Name).
			Annotation(agentsv1beta1.IdleTimeoutAnnotation, "0").Annotation(agentsv1beta1.WakeOnRequestAnnotation, "true").
			ControlledBy(claim, claimGVK).Obj(), want: activity.Policy{WakeOnRequest: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each lookup uses a fresh reconciler: a restarted controller sees the same policy.
			for range 2 {
				got, err := h.reconciler().Policy(h.ctx, tc.sb)
				if err != nil || got != tc.want {
					t.Fatalf("Policy = %+v, %v; want %+v", got, err, tc.want)
				}
			}
		})
	}

	// SetPolicy (the seam for E2B's autoPause) changes the claim's layer.
	if err := activity.SetPolicy(h.ctx, env.Client, claim, activity.Policy{Timeout: 7 * time.Minute, WakeOnRequest: true}); err != nil {
		t.Fatal(err)
	}
	fromClaim := builder.MakeSandbox("set", h.ns).Annotation(agentsv1beta1.SandboxTemplateRefAnnotation, tpl.Name).ControlledBy(claim, claimGVK).Obj()
	if got, err := h.reconciler().Policy(h.ctx, fromClaim); err != nil || got != (activity.Policy{Timeout: 7 * time.Minute, WakeOnRequest: true}) {
		t.Fatalf("after SetPolicy on the claim: Policy = %+v, %v; want 7m with wake", got, err)
	}

	// A restart between the start of the clock and its end still suspends on time, and the
	// template's wake-on-request=false is kept on the suspended Sandbox for the router.
	sb := h.readySandbox(fromTemplate.Obj())
	h.pass(h.reconciler(), sb)
	h.clock.Step(31 * time.Minute)
	h.pass(h.reconciler(), sb)
	if got := h.get(sb); got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended ||
		got.Annotations[agentsv1beta1.SuspendReasonAnnotation] != agentsv1beta1.SuspendReasonIdleNoWake {
		t.Fatalf("after a restart and the template's timeout: operatingMode %q, annotations %v; want Suspended, reason IdleNoWake",
			got.Spec.OperatingMode, got.Annotations)
	}
}

func TestManualSuspensionIsNeverMarkedIdle(t *testing.T) {
	h := newHarness(t)
	r := h.reconciler()
	sb := h.started("manual", r)
	h.clock.Step(timeout + time.Minute)
	h.pass(r, sb)
	if !suspendedForIdle(h.get(sb)) {
		t.Fatal("not suspended for idle")
	}
	// A user resumes it, then suspends it by hand: the idle mark must be gone by then.
	update(t, h.ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	// A pass whose patch lost a race with the Sandbox controller's own writes leaves the work to
	// the next pass, which the watch would bring; here the test brings it.
	framework.Eventually(t, func(context.Context) error {
		h.pass(r, sb)
		if v, marked := h.get(sb).Annotations[agentsv1beta1.SuspendReasonAnnotation]; marked {
			return fmt.Errorf("still marked %q while running", v)
		}
		return nil
	})
	update(t, h.ctx, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	h.pass(r, sb)
	if got := h.get(sb); got.Annotations[agentsv1beta1.SuspendReasonAnnotation] != "" {
		t.Fatalf("a manual suspension after a resume carries %s=%q; traffic would wake it",
			agentsv1beta1.SuspendReasonAnnotation, got.Annotations[agentsv1beta1.SuspendReasonAnnotation])
	}
}

func update(t *testing.T, _ context.Context, sb *agentsv1beta1.Sandbox, mutate func(*agentsv1beta1.Sandbox)) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		mutate(got)
		return env.Client.Update(ctx, got)
	})
}
