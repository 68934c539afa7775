package e2b

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// lockedDaemon refuses the first `refusals` probes as a locked warm member does, then accepts.
type lockedDaemon struct {
	refusals int32
	calls    atomic.Int32
}

func (d *lockedDaemon) RoundTrip(*http.Request) (*http.Response, error) {
	code := http.StatusOK
	if d.calls.Add(1) <= d.refusals {
		code = http.StatusForbidden
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// The wait records each step of a create: the refused probes before the daemon accepted the
// token, and a Server-Timing value with every step.
func TestCreateStepsRecordTheWait(t *testing.T) {
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "abc", UID: "uid-abc"}}
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pool-x", UID: "uid-x", Labels: map[string]string{agentsv1beta1.ClaimUIDLabel: "uid-abc"}},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sandboxd", Ports: []corev1.ContainerPort{{ContainerPort: e2bapi.EnvdPort}}}}}}}},
		Status: agentsv1beta1.SandboxStatus{PodIPs: []string{"198.18.0.10"},
			Conditions: []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue}}},
	}
	lag := &laggingCache{claim: claim, sandbox: sb}
	lag.claimVisible.Store(true)
	daemon := &lockedDaemon{refusals: 2}
	f := &FrontDoor{cfg: Config{Tokens: fixedTokens{}, Transport: daemon, DaemonPort: e2bapi.EnvdPort}, cache: lag, waits: newNotifier(), stats: newMetrics(nil)}

	ctx, steps := withSteps(context.Background(), time.Now())
	steps.markClaimed(time.Now())
	if _, err := f.awaitDaemon(ctx, claim); err != nil {
		t.Fatalf("awaitDaemon: %v", err)
	}
	if steps.refused != 2 || daemon.calls.Load() != 3 {
		t.Errorf("recorded %d refused probes of %d calls, want 2 of 3", steps.refused, daemon.calls.Load())
	}
	if steps.bound.IsZero() || steps.accepted.Before(steps.bound) || steps.bound.Before(steps.claimed) {
		t.Errorf("steps out of order: claimed %v, bound %v, accepted %v", steps.claimed, steps.bound, steps.accepted)
	}
	want := regexp.MustCompile(`^claim;dur=[0-9.]+, bound;dur=[0-9.]+, daemon;dur=[0-9.]+;desc="2 refused", probe;dur=[0-9.]+$`)
	if h := steps.header(); !want.MatchString(h) {
		t.Errorf("Server-Timing %q does not match %s", h, want)
	}
}

func TestCreateStepsHeaderLeavesOutStepsNotReached(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		steps *createSteps
		want  string
	}{
		{name: "no record", steps: nil, want: ""},
		{name: "claim not created", steps: &createSteps{start: t0}, want: ""},
		{name: "claimed, never bound", steps: &createSteps{start: t0, claimed: t0.Add(12500 * time.Microsecond)}, want: "claim;dur=12.5"},
		{name: "bound, never accepted", steps: &createSteps{start: t0, claimed: t0.Add(10 * time.Millisecond), bound: t0.Add(30 * time.Millisecond), refused: 4},
			want: "claim;dur=10.0, bound;dur=20.0"},
		{name: "accepted", steps: &createSteps{start: t0, claimed: t0.Add(10 * time.Millisecond), bound: t0.Add(30 * time.Millisecond),
			accepted: t0.Add(45 * time.Millisecond), probe: 3 * time.Millisecond},
			want: `claim;dur=10.0, bound;dur=20.0, daemon;dur=15.0;desc="0 refused", probe;dur=3.0`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.steps.header(); got != tt.want {
				t.Errorf("header() = %q, want %q", got, tt.want)
			}
		})
	}
}
