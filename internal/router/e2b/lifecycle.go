package e2b

// The lifecycle of a running sandbox: setTimeout, pause, and connect (which resumes), with E2B's
// lifecycle options on Paddock's idle machinery. autoPause (the SDK's lifecycle.onTimeout:
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

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

func (f *FrontDoor) setTimeout(w http.ResponseWriter, r *http.Request, ns string) {
	var req e2bapi.TimeoutRequest
	if err := decode(r, &req); err != nil || req.Timeout == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body must be {\"timeout\": <seconds>}: %v", err))
		return
	}
	lifetime, err := timeoutOf(req.Timeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		if err := f.setLifetime(r.Context(), c, lifetime); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// pause suspends the claim's Sandbox: its Pod goes, its volumes stay, and what else stays (memory
// under gVisor, or the root filesystem) is what the Sandbox's snapshots.paddock.dev/suspend,
// from its template, says. A paused sandbox does not expire, as in E2B; connect gives it a new
// timeout.
func (f *FrontDoor) pause(w http.ResponseWriter, r *http.Request, ns string) {
	var req e2bapi.ConnectRequest // {"memory": bool}: accepted; the template decides what is kept
	if !readBody(w, r, &req) {
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		sb, err := f.boundSandbox(r.Context(), c)
		switch {
		case err != nil:
			f.internal(w, err)
			return
		case sb == nil:
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is still starting; pause it once create has answered", c.Name))
			return
		case stateOf(sb) == e2bapi.StatePaused:
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", c.Name))
			return
		}
		if err := f.setMode(r.Context(), sb, agentsv1beta1.SandboxOperatingModeSuspended); err != nil {
			f.internal(w, err)
			return
		}
		if err := f.setExpiry(r.Context(), c, nil); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// connect resumes a paused sandbox (201) or finds it running (200), and answers once its daemon
// accepts requests.
func (f *FrontDoor) connect(w http.ResponseWriter, r *http.Request, ns string) {
	var req e2bapi.ConnectRequest
	if !readBody(w, r, &req) {
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		sb, err := f.boundSandbox(r.Context(), c)
		if err != nil {
			f.internal(w, err)
			return
		}
		resumed := sb != nil && stateOf(sb) == e2bapi.StatePaused
		ctx, cancel := context.WithTimeout(r.Context(), f.cfg.CreateTimeout)
		defer cancel()
		if resumed {
			if err := f.resume(ctx, sb); err != nil {
				writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox %q could not be resumed: %v", c.Name, err))
				return
			}
		}
		if resumed || req.Timeout != nil {
			lifetime, err := timeoutOf(req.Timeout)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			// connect never shortens a running sandbox's life, as E2B's does not.
			next := expiry(f.cfg.Now(), lifetime)
			l := c.Spec.Lifecycle
			switch {
			case pausesOnTimeout(c):
				if req.Timeout != nil && (resumed || claimPolicy(c).Timeout < lifetime) {
					err = f.setLifetime(r.Context(), c, lifetime)
				}
			case resumed || l == nil || l.ShutdownTime == nil || l.ShutdownTime.Before(next.ShutdownTime):
				err = f.setExpiry(r.Context(), c, next)
			}
			if err != nil {
				f.internal(w, err)
				return
			}
		}
		ready, err := f.awaitDaemon(ctx, c)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox %q did not become ready in %s: %v", c.Name, f.cfg.CreateTimeout, err))
			return
		}
		token, err := f.sandboxToken(ready)
		if err != nil {
			f.internal(w, err)
			return
		}
		httpjson.Write(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[resumed], f.sandboxResponse(c, token))
	})
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

// setLifetime gives the sandbox lifetime from now: a new expiry, or, with autoPause, a new idle
// timeout (the idle controller counts it from the last activity).
func (f *FrontDoor) setLifetime(ctx context.Context, c *extensionsv1beta1.SandboxClaim, lifetime time.Duration) error {
	if !pausesOnTimeout(c) {
		return f.setExpiry(ctx, c, expiry(f.cfg.Now(), lifetime))
	}
	p := claimPolicy(c)
	p.Timeout = lifetime
	return activity.SetPolicy(ctx, f.client, c, p)
}

// setExpiry replaces the claim's lifecycle (nil: no expiry) with one merge patch. No optimistic
// lock: the controller's status writes change the resourceVersion, and the front door is the only
// writer of an E2B claim's lifecycle, so the last write winning is the intent.
func (f *FrontDoor) setExpiry(ctx context.Context, c *extensionsv1beta1.SandboxClaim, l *extensionsv1beta1.Lifecycle) error {
	orig := c.DeepCopy()
	c.Spec.Lifecycle = l
	if err := f.client.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("updating the expiry of SandboxClaim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// setMode asks the Sandbox to be Running or Suspended, with a merge patch of that one field.
func (f *FrontDoor) setMode(ctx context.Context, sb *agentsv1beta1.Sandbox, mode agentsv1beta1.SandboxOperatingMode) error {
	orig := sb.DeepCopy()
	sb.Spec.OperatingMode = mode
	if err := f.client.Patch(ctx, sb, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting operatingMode %s on Sandbox %s/%s: %w", mode, sb.Namespace, sb.Name, err)
	}
	return nil
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

// lifecycleDetailOf is SandboxDetail.lifecycle of c.
func lifecycleDetailOf(c *extensionsv1beta1.SandboxClaim) *e2bapi.LifecycleDetail {
	if !pausesOnTimeout(c) {
		return &e2bapi.LifecycleDetail{OnTimeout: e2bapi.OnTimeoutKill}
	}
	return &e2bapi.LifecycleDetail{OnTimeout: e2bapi.OnTimeoutPause, AutoResume: claimPolicy(c).WakeOnRequest}
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
