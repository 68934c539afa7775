package autosize

import (
	"fmt"
	"math"
	"slices"
	"time"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Input is what one sizing decision depends on.
type Input struct {
	Policy Policy
	// Current is the pool's spec.replicas.
	Current int32
	// Claims are when members of the pool were claimed, oldest first. Those before
	// Now-RateWindow are ignored.
	Claims     []time.Time
	RateWindow time.Duration
	// ReadyTimes are recent creation-to-Ready times of the pool's members. With none the
	// decision has no data and keeps Current (within the policy).
	ReadyTimes []time.Duration
	// History is the previous decision's History: the recommendations a scale-down must wait
	// out. Empty after a restart, when Current stands in for what came before.
	History []Recommendation
	// Window is the stabilization window: the pool shrinks only to the highest recommendation
	// made within it.
	Window time.Duration
	Now    time.Time
}

// Recommendation is what demand alone asked for at one time.
type Recommendation struct {
	At       time.Time
	Replicas int32
}

// Decision is a sizing decision.
type Decision struct {
	// Replicas is what spec.replicas should be.
	Replicas int32
	// Wanted is what demand alone asks for now, and Recommended the same within the policy.
	Wanted, Recommended int32
	// Claims is how many claims the rate counts, Rate the claims per second and ReadyTime the
	// start-up time Recommended comes from; NoData when no start-up time has been seen.
	Claims    int
	Rate      float64
	ReadyTime time.Duration
	NoData    bool
	// History is the recommendations to pass to the next decision: those within the window
	// that a later, lower one has not superseded, highest first.
	History []Recommendation
	// RecheckAt is when the decision may go down without a new observation: when the highest
	// recommendation leaves the window. Zero when the pool is at its minimum.
	RecheckAt time.Time
}

// Directions of a decision, for events and metrics.
const (
	Up   = "up"
	Down = "down"
)

// readyPercentile is the share of observed start-up times the estimate covers: the pool is sized
// for slow starts, not typical ones.
const readyPercentile = 0.9

// Decide sizes the pool. Demand is the claims seen within one start-up time (when they came
// faster than members start) or the claim rate times the start-up time, rounded up, plus
// headroom, within [Min, Max]. The pool grows to that at once; it shrinks only to the highest
// recommendation of the last Window, so a scale-down needs Window of lower demand and a
// scale-up after it needs demand above anything seen in that Window.
func Decide(in Input) Decision {
	d := Decision{Recommended: in.Policy.Clamp(in.Current)}
	claims := recent(in.Claims, in.Now.Add(-in.RateWindow))
	if len(in.ReadyTimes) == 0 {
		d.NoData = true
	} else {
		d.ReadyTime = percentile(in.ReadyTimes, readyPercentile)
		var members float64
		d.Claims, d.Rate, members = demand(claims, d.ReadyTime, in.Now)
		d.Wanted = int32(min(math.Ceil(members-1e-9), extensionsv1beta1.AutosizeLimit))
		if d.Wanted > 0 {
			d.Wanted += in.Policy.Headroom // on top of demand: a pool without any may empty to its minimum
		}
		d.Recommended = in.Policy.Clamp(d.Wanted)
	}

	history := in.History
	if len(history) == 0 {
		history = []Recommendation{{At: in.Now, Replicas: in.Policy.Clamp(in.Current)}}
	}
	d.History = push(expire(history, in.Now.Add(-in.Window)), Recommendation{At: in.Now, Replicas: d.Recommended})
	highest := d.History[0]
	switch {
	case d.Recommended >= in.Current:
		d.Replicas = d.Recommended
	default:
		d.Replicas = min(in.Current, highest.Replicas)
	}
	// A policy that changed applies at once, in either direction.
	d.Replicas = in.Policy.Clamp(d.Replicas)
	if d.Replicas > in.Policy.Min {
		d.RecheckAt = highest.At.Add(in.Window)
	}
	return d
}

// demand returns the claims counted, their rate, and the members they call for: every claim
// when all came within one start-up time (a burst), else the rate times the start-up time. The
// rate counts the claims after the oldest over the time since it, so that it decays once the
// claims stop.
func demand(claims []time.Time, ready time.Duration, now time.Time) (n int, rate, members float64) {
	n = len(claims)
	if n == 0 {
		return 0, 0, 0
	}
	span := now.Sub(claims[0])
	if span < ready {
		return n, float64(n) / ready.Seconds(), float64(n)
	}
	rate = float64(n-1) / max(span.Seconds(), 1e-3)
	return n, rate, rate * ready.Seconds()
}

// recent returns the claims after cutoff.
func recent(claims []time.Time, cutoff time.Time) []time.Time {
	i, _ := slices.BinarySearchFunc(claims, cutoff, func(t, c time.Time) int {
		if t.After(c) {
			return 1
		}
		return -1
	})
	return claims[i:]
}

// expire drops the recommendations made at or before cutoff.
func expire(h []Recommendation, cutoff time.Time) []Recommendation {
	i := 0
	for i < len(h) && !h[i].At.After(cutoff) {
		i++
	}
	return slices.Clone(h[i:])
}

// push appends r, dropping the earlier recommendations at or below it: r outlives them in the
// window, so they can never be its highest again. The history stays sorted highest first.
func push(h []Recommendation, r Recommendation) []Recommendation {
	for len(h) > 0 && h[len(h)-1].Replicas <= r.Replicas {
		h = h[:len(h)-1]
	}
	return append(h, r)
}

// percentile returns the nearest-rank p-th percentile of samples.
func percentile(samples []time.Duration, p float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

// Direction says whether going from current to d.Replicas is Up, Down or neither ("").
func (d Decision) Direction(current int32) string {
	switch {
	case d.Replicas > current:
		return Up
	case d.Replicas < current:
		return Down
	}
	return ""
}

// Why says, for an event, why the pool goes from current to d.Replicas.
func (d Decision) Why(p Policy, current int32, window time.Duration) string {
	change := fmt.Sprintf("spec.replicas %d -> %d: ", current, d.Replicas)
	claims := "claims"
	if d.Claims == 1 {
		claims = "claim"
	}
	demand := fmt.Sprintf("%d %s (%.2f/s) x %s to Ready + headroom %d", d.Claims, claims, d.Rate, d.ReadyTime.Round(10*time.Millisecond), p.Headroom)
	switch {
	case current > p.Max:
		return change + fmt.Sprintf("above %s %d", extensionsv1beta1.AutosizeMaxAnnotation, p.Max)
	case current < p.Min:
		return change + fmt.Sprintf("below %s %d", extensionsv1beta1.AutosizeMinAnnotation, p.Min)
	case d.Replicas > current && d.Wanted > p.Max:
		return change + demand + fmt.Sprintf(", capped at %s %d", extensionsv1beta1.AutosizeMaxAnnotation, p.Max)
	case d.Replicas > current:
		return change + demand
	default:
		return change + fmt.Sprintf("demand stayed at or below %d for %s (now %s)", d.Replicas, window, demand)
	}
}
