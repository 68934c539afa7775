package activity

import (
	"fmt"
	"strconv"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// Policy is the idle policy that applies to one Sandbox: its annotations, resolved by the idle
// controller and written by front doors that map their own options onto it.
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

// Annotations renders p as the annotations that set it, for SetPolicy and for front doors that
// build objects (E2B's autoPause/autoResume on the claim they create).
func (p Policy) Annotations() map[string]string {
	return map[string]string{
		agentsv1beta1.IdleTimeoutAnnotation:   p.Timeout.String(),
		agentsv1beta1.WakeOnRequestAnnotation: strconv.FormatBool(p.WakeOnRequest),
	}
}
