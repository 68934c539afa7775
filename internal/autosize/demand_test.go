package autosize

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDemandFollowsMembersClaimedBeforeReady(t *testing.T) {
	d := NewDemand(time.Minute, 5*time.Minute)
	p := Policy{Min: 1, Max: 20, Headroom: 1}
	created := now.Add(-time.Second)
	d.Claim("ns/pool", "claim-a", now, now)
	d.MemberTaken("ns/pool", "a", created, false, now)
	if dec := d.Decide("ns/pool", p, 1, now); !dec.NoData {
		t.Fatalf("decision before any start-up time was seen: %+v, want NoData", dec)
	}
	d.ReadyAfterClaim("someone-else", now.Add(time.Second))
	d.ReadyAfterClaim("a", now.Add(3*time.Second))
	dec := d.Decide("ns/pool", p, 1, now.Add(3*time.Second))
	if dec.NoData || dec.ReadyTime != 4*time.Second {
		t.Fatalf("after the claimed member turned Ready: NoData %v, ReadyTime %s; want its 4s start-up time", dec.NoData, dec.ReadyTime)
	}
	// Seen once: a second Ready of the same Sandbox is not another sample.
	d.ReadyAfterClaim("a", now.Add(time.Minute))
	if dec := d.Decide("ns/pool", p, 1, now.Add(4*time.Second)); dec.ReadyTime != 4*time.Second {
		t.Errorf("ReadyTime %s after a repeated Ready, want 4s", dec.ReadyTime)
	}
}

func TestDemandKeepsTheLatestReadyTimes(t *testing.T) {
	d := NewDemand(time.Minute, 5*time.Minute)
	for range readySamples {
		d.Ready("ns/pool", now.Add(-time.Minute), now)
	}
	for range readySamples {
		d.Ready("ns/pool", now.Add(-time.Second), now)
	}
	if dec := d.Decide("ns/pool", Policy{Max: 5}, 1, now); dec.ReadyTime != time.Second {
		t.Errorf("ReadyTime %s, want 1s: the older, slower samples were replaced", dec.ReadyTime)
	}
}

func TestDemandHoldsAScaleDownForTheWindow(t *testing.T) {
	d := NewDemand(time.Minute, 5*time.Minute)
	p := Policy{Min: 1, Max: 20, Headroom: 1}
	d.Ready("ns/pool", now.Add(-2*time.Second), now)
	for i := range 10 {
		d.Claim("ns/pool", types.UID(rune('a'+i)), now, now)
	}
	if dec := d.Decide("ns/pool", p, 1, now); dec.Replicas != 11 {
		t.Fatalf("after a burst of 10: %d replicas, want 11", dec.Replicas)
	}
	later := now.Add(2 * time.Minute)
	if dec := d.Decide("ns/pool", p, 11, later); dec.Replicas != 11 || !dec.RecheckAt.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("2m after the burst: %d replicas, recheck at %s; want 11 until %s", dec.Replicas, dec.RecheckAt, now.Add(5*time.Minute))
	}
	if dec := d.Decide("ns/pool", p, 11, now.Add(5*time.Minute)); dec.Replicas != 1 {
		t.Fatalf("a window after the burst: %d replicas, want the minimum 1", dec.Replicas)
	}
	d.Forget("ns/pool")
	if dec := d.Decide("ns/pool", p, 7, now.Add(6*time.Minute)); !dec.NoData || dec.Replicas != 7 {
		t.Errorf("after Forget: %+v, want no data and the 7 replicas kept", dec)
	}
}

// TestDemandCountsEveryClaimOnce: a claim counts once, however often it is seen, whether a member
// served it or not; claims listed at start-up count only within the rate window, in order.
func TestDemandCountsEveryClaimOnce(t *testing.T) {
	d := NewDemand(time.Minute, 5*time.Minute)
	p := Policy{Min: 0, Max: 50}
	d.Ready("ns/pool", now.Add(-10*time.Second), now)
	d.Claim("ns/pool", "a", now, now)
	d.Claim("ns/pool", "a", now, now)
	d.Claim("ns/pool", "old", now.Add(-2*time.Minute), now)
	d.Claim("ns/pool", "b", now.Add(-30*time.Second), now) // listed at start-up, out of order
	d.MemberTaken("ns/pool", "member-of-a", now.Add(-time.Minute), true, now)
	dec := d.Decide("ns/pool", p, 0, now)
	if dec.Claims != 2 {
		t.Fatalf("%d claims counted, want 2 (a once, b; not the one before the window, not the member)", dec.Claims)
	}
	// b is the oldest: the rate is one claim after it over its 30 s.
	if want := 1.0 / 30; dec.Rate < want-1e-9 || dec.Rate > want+1e-9 {
		t.Errorf("rate %v/s, want %v/s counted from b", dec.Rate, want)
	}
}

// TestDemandLearnsStartUpFromColdClaims: a pool with no members (at zero, or run dry) learns its
// start-up time from the cold Sandboxes of its claims, once per claim, and claims it never
// recorded teach it nothing.
func TestDemandLearnsStartUpFromColdClaims(t *testing.T) {
	d := NewDemand(time.Minute, 5*time.Minute)
	p := Policy{Min: 0, Max: 20}
	for i := range 4 {
		d.Claim("ns/pool", types.UID(rune('a'+i)), now.Add(time.Duration(i)*time.Second), now.Add(3*time.Second))
	}
	if dec := d.Decide("ns/pool", p, 0, now.Add(3*time.Second)); !dec.NoData || dec.Replicas != 0 {
		t.Fatalf("before a start-up time: %+v, want no data and 0 replicas", dec)
	}
	d.ColdReady("unrecorded", now, now.Add(time.Minute))
	d.ColdReady("a", now.Add(-time.Second), now.Add(4*time.Second))
	d.ColdReady("a", now, now.Add(50*time.Second)) // Ready again later (a restart): not a start-up
	dec := d.Decide("ns/pool", p, 0, now.Add(4*time.Second))
	if dec.NoData || dec.ReadyTime != 5*time.Second {
		t.Fatalf("after a cold Sandbox turned Ready: NoData %v, ReadyTime %s; want its 5s", dec.NoData, dec.ReadyTime)
	}
	if dec.Replicas != 4 {
		t.Errorf("4 claims within one start-up time: %d replicas, want 4", dec.Replicas)
	}
	d.Gone("b")
	d.ColdReady("b", now, now.Add(6*time.Second))
	if dec := d.Decide("ns/pool", p, 4, now.Add(6*time.Second)); dec.ReadyTime != 5*time.Second {
		t.Errorf("ReadyTime %s after a deleted claim's Sandbox turned Ready, want 5s: a gone claim teaches nothing", dec.ReadyTime)
	}
}
