package e2b

// E2B's lifecycle options on Paddock's idle machinery. autoPause (the SDK's lifecycle.onTimeout:
// "pause") turns the sandbox's timeout into an idle timeout on its claim: the idle controller
// suspends the Sandbox once it has had no activity for that long, instead of the claim expiring
// and being deleted. autoResume is the idle policy's wake-on-request: a data-plane request, or a
// connect, to a sandbox the idle controller paused wakes it through the router's Waker. Without
// autoResume the idle controller marks the suspension IdleNoWake and traffic never wakes it;
// connect still resumes it, as E2B's does.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// onTimeout values of E2B's SandboxDetail.lifecycle.
const (
	onTimeoutKill  = "kill"
	onTimeoutPause = "pause"
)

// lifecycleOptions are E2B's create options that decide what the timeout does.
type lifecycleOptions struct {
	// autoPause suspends the sandbox at its timeout instead of deleting it.
	autoPause bool
	// autoResume lets traffic wake a sandbox autoPause suspended.
	autoResume bool
}

// lifecycleOf reads the create request's autoPause, autoPauseMemory and autoResume, or an error
// naming the field.
func lifecycleOf(req *CreateRequest) (lifecycleOptions, error) {
	var o lifecycleOptions
	if req.AutoPause != nil {
		o.autoPause = *req.AutoPause
	}
	if req.AutoResume != nil && req.AutoResume.Enabled != nil {
		o.autoResume = *req.AutoResume.Enabled
	}
	if o.autoResume && !o.autoPause {
		return o, errors.New("autoResume.enabled is true but autoPause is not: only a sandbox paused at its timeout (autoPause, the SDK's lifecycle.onTimeout \"pause\") can be resumed by traffic")
	}
	return o, nil
}

// idlePolicy is the idle policy an autoPause sandbox's claim carries.
func (o lifecycleOptions) idlePolicy(lifetime time.Duration) activity.Policy {
	return activity.Policy{Timeout: lifetime, WakeOnRequest: o.autoResume}
}

// pausesOnTimeout reports whether the claim was created with autoPause: its timeout is the idle
// timeout in its annotations, and it has no expiry.
func pausesOnTimeout(c *extensionsv1beta1.SandboxClaim) bool {
	_, ok := c.Annotations[agentsv1beta1.IdleTimeoutAnnotation]
	return ok
}

// claimPolicy is the idle policy of an autoPause claim, as its annotations say.
func claimPolicy(c *extensionsv1beta1.SandboxClaim) activity.Policy {
	return activity.Resolve(c.Annotations)
}

// lifecycleDetail is SandboxDetail.lifecycle.
type lifecycleDetail struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

func lifecycleDetailOf(c *extensionsv1beta1.SandboxClaim) *lifecycleDetail {
	if !pausesOnTimeout(c) {
		return &lifecycleDetail{OnTimeout: onTimeoutKill}
	}
	return &lifecycleDetail{OnTimeout: onTimeoutPause, AutoResume: claimPolicy(c).WakeOnRequest}
}

// pauseAt is when an autoPause sandbox pauses if nothing happens before: its last recorded
// activity (the claim's creation before any) plus the idle timeout.
func pauseAt(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) time.Time {
	last := c.CreationTimestamp.Time
	if sb != nil {
		if at, ok := activity.Parse(sb.Annotations[agentsv1beta1.LastActivityAnnotation]); ok && at.After(last) {
			last = at
		}
	}
	return last.Add(claimPolicy(c).Timeout)
}

// reasonWakeTimeout is the failure of a wake that did not serve within the router's wake timeout.
const reasonWakeTimeout = "wake_timeout"

// retryAfterWake is the Retry-After of a wake that timed out: the resume goes on without us.
const retryAfterWake = "5"

// wake holds a data-plane request for the paused sandbox id (whose token the caller proved)
// while the router's Waker resumes it. Only a sandbox the idle controller paused with autoResume
// wakes; one paused through the API, or without autoResume, stays paused.
func (f *FrontDoor) wake(ctx context.Context, id string, t headers.Target) (resolve.Endpoint, *resolve.Error) {
	paused := &resolve.Error{Status: http.StatusServiceUnavailable, Reason: resolve.ReasonSuspended}
	if f.cfg.Waker == nil {
		paused.Detail = fmt.Sprintf("sandbox %q is paused and this router does not wake sandboxes (--wake-on-request=false); resume it with Sandbox.connect", id)
		return resolve.Endpoint{}, paused
	}
	ep, err := f.cfg.Waker.Wake(ctx, t)
	var rerr *resolve.Error
	switch {
	case err == nil:
		return ep, nil
	case errors.Is(err, wake.ErrNotWakeable):
		paused.Detail = fmt.Sprintf("sandbox %q is paused and traffic does not resume it (paused through the API, or created without autoResume); resume it with Sandbox.connect", id)
		return resolve.Endpoint{}, paused
	case errors.As(err, &rerr):
		return resolve.Endpoint{}, rerr
	case ctx.Err() != nil:
		return resolve.Endpoint{}, &resolve.Error{Status: http.StatusServiceUnavailable, Reason: reasonWakeTimeout,
			Detail: "the client went away while the sandbox was resuming"}
	}
	return resolve.Endpoint{}, &resolve.Error{Status: http.StatusServiceUnavailable, Reason: reasonWakeTimeout,
		Detail: fmt.Sprintf("sandbox %q is resuming but did not serve within the router's wake timeout (%s); retry in a few seconds", id, f.cfg.Waker.Timeout())}
}

// resume makes a paused sandbox run again for connect: through the Waker when the idle
// controller paused it with autoResume, so that connect and concurrent data-plane requests share
// one resume; with a patch of operatingMode otherwise (paused through the API, or without
// autoResume: connect is the explicit way back, as in E2B).
func (f *FrontDoor) resume(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	if f.cfg.Waker != nil && wake.Wakeable(sb) {
		_, err := f.cfg.Waker.Wake(ctx, headers.Target{Namespace: sb.Namespace, Name: sb.Name, Port: f.cfg.DaemonPort})
		if err == nil || !errors.Is(err, wake.ErrNotWakeable) {
			return err
		}
		// Changed under us (suspended by hand meanwhile): resume it as connect does.
	}
	return f.setMode(ctx, sb, agentsv1beta1.SandboxOperatingModeRunning)
}
