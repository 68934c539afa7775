package idle

import (
	"fmt"
	"strconv"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/activity"
)

// Policy is the idle policy that applies to one Sandbox.
type Policy struct {
	// Timeout is how long a Sandbox may stay without activity; 0 turns idling off.
	Timeout time.Duration
	// WakeOnRequest lets traffic through the router wake a Sandbox suspended for being idle.
	WakeOnRequest bool
}

// ParseTimeout parses an idle-timeout annotation value: a non-negative Go duration.
func ParseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("annotation %s=%q must be a non-negative Go duration such as 15m or 1h30m", agentsv1beta1.IdleTimeoutAnnotation, v)
	}
	return d, nil
}

// ParseWake parses a wake-on-request annotation value: true or false.
func ParseWake(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil || (v != "true" && v != "false") {
		return false, fmt.Errorf("annotation %s=%q must be true or false", agentsv1beta1.WakeOnRequestAnnotation, v)
	}
	return b, nil
}

// Resolve returns the policy from annotation maps ordered most specific first (Sandbox, claim,
// template): each key is taken from the first map that sets it. Values admission let through
// are valid; an invalid one (admission policy not installed) counts as unset, the safe side.
func Resolve(layers ...map[string]string) Policy {
	p := Policy{WakeOnRequest: true}
	timeoutSet, wakeSet := false, false
	for _, a := range layers {
		if v, ok := a[agentsv1beta1.IdleTimeoutAnnotation]; ok && !timeoutSet {
			if d, err := ParseTimeout(v); err == nil {
				p.Timeout, timeoutSet = d, true
			}
		}
		if v, ok := a[agentsv1beta1.WakeOnRequestAnnotation]; ok && !wakeSet {
			if b, err := ParseWake(v); err == nil {
				p.WakeOnRequest, wakeSet = b, true
			}
		}
	}
	return p
}

// Decision is what one pass does with a Sandbox whose recorded activity has run out.
type Decision struct {
	// Suspend is true when the Sandbox has been idle for the whole timeout.
	Suspend bool
	// Record, when not zero, is the newer last activity to write to paddock.dev/last-activity.
	Record time.Time
	// After is when to look again, when not suspending.
	After time.Duration
}

// RouterLag is how far paddock.dev/last-activity can trail the router's latest request to a
// Sandbox: the router flushes what it saw once per activity.RecordInterval and writes only
// activity that moved by at least that much.
const RouterLag = 2 * activity.RecordInterval

// Decide judges a Sandbox from the last activity recorded on it and, when its daemon answered,
// the daemon's own account (nil: no daemon, or not asked). A busy daemon is active now. Without
// a daemon's account the annotation is the only witness and may trail traffic by RouterLag, so a
// shorter timeout acts as RouterLag: it would otherwise suspend a sandbox in use.
func Decide(p Policy, now, recorded time.Time, daemon *sandboxd.Activity) Decision {
	if daemon == nil && p.Timeout < RouterLag {
		p.Timeout = RouterLag
	}
	last := recorded
	if daemon != nil {
		switch {
		case daemon.Busy():
			last = now
		case daemon.LastActivity.After(last):
			last = daemon.LastActivity
		}
	}
	deadline := last.Add(p.Timeout)
	if !now.Before(deadline) {
		return Decision{Suspend: true}
	}
	d := Decision{After: deadline.Sub(now)}
	if last.Sub(recorded) >= activity.RecordInterval {
		d.Record = last
	}
	return d
}

// Annotations renders p as the annotations that set it, for SetPolicy and for front doors that
// build objects (E2B's autoPause/autoResume on the claim they create).
func (p Policy) Annotations() map[string]string {
	return map[string]string{
		agentsv1beta1.IdleTimeoutAnnotation:   p.Timeout.String(),
		agentsv1beta1.WakeOnRequestAnnotation: strconv.FormatBool(p.WakeOnRequest),
	}
}
