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
	d.Claimed("ns/pool", "a", created, false, now)
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
		d.Claimed("ns/pool", types.UID(rune('a'+i)), now.Add(-time.Minute), true, now)
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
