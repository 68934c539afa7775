package e2b

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// serverTimingHeader carries a create's steps to the client (W3C Server Timing): the SDK ignores
// it, paddock-bench splits each create with it (docs/performance/results.md).
const serverTimingHeader = "Server-Timing"

// createSteps is when a create passed each step, as the front door saw it.
type createSteps struct {
	start time.Time
	// claimed is when the claim's create returned; bound when the wait first found a routable
	// Sandbox bound to it; accepted when the daemon accepted the sandbox's token.
	claimed, bound, accepted time.Time
	// refused counts the probes the daemon refused or did not answer; probe is the round trip
	// of the last probe.
	refused int
	probe   time.Duration
}

type stepsKey struct{}

// withSteps returns ctx carrying a new record of the steps of a create that starts now.
func withSteps(ctx context.Context, now time.Time) (context.Context, *createSteps) {
	s := &createSteps{start: now}
	return context.WithValue(ctx, stepsKey{}, s), s
}

// stepsOf is the record ctx carries; nil (which records nothing) when it carries none.
func stepsOf(ctx context.Context) *createSteps {
	s, _ := ctx.Value(stepsKey{}).(*createSteps)
	return s
}

func (s *createSteps) markClaimed(at time.Time) {
	if s != nil {
		s.claimed = at
	}
}

func (s *createSteps) markBound(at time.Time) {
	if s != nil && s.bound.IsZero() {
		s.bound = at
	}
}

// markProbe records one probe's round trip and whether the daemon accepted it.
func (s *createSteps) markProbe(took time.Duration, end time.Time, ok bool) {
	if s == nil {
		return
	}
	s.probe = took
	if ok {
		s.accepted = end
	} else {
		s.refused++
	}
}

// header renders the steps as a Server-Timing value, each a duration in milliseconds since the
// previous step: claim (the claim's create), bound (until a routable Sandbox was bound to it),
// daemon (until its daemon accepted the token, with the refused probes), probe (the accepting
// probe's round trip). A step not reached is left out, and so are the ones after it.
func (s *createSteps) header() string {
	if s == nil || s.claimed.IsZero() {
		return ""
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	parts := []string{"claim;dur=" + ms(s.claimed.Sub(s.start))}
	if !s.bound.IsZero() {
		parts = append(parts, "bound;dur="+ms(s.bound.Sub(s.claimed)))
		if !s.accepted.IsZero() {
			parts = append(parts, fmt.Sprintf("daemon;dur=%s;desc=\"%d refused\"", ms(s.accepted.Sub(s.bound)), s.refused),
				"probe;dur="+ms(s.probe))
		}
	}
	return strings.Join(parts, ", ")
}
