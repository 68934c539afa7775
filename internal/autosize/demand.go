package autosize

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Bounds of what Demand keeps per pool.
const (
	// readySamples is how many recent start-up times the estimate is made from.
	readySamples = 20
	// maxClaims bounds the claim times kept; the rate stays right, over a shorter span, when a
	// pool is claimed faster than maxClaims per rate window.
	maxClaims = 10000
	// followFor is how long a member claimed before it was Ready is followed for its start-up
	// time; one slower than that is an outlier the pool need not be sized for.
	followFor = 10 * time.Minute
	// maxFollowed bounds the members followed at once, over all pools.
	maxFollowed = 4096
)

// Demand records, per pool, when its members were claimed, how long they took to become Ready,
// and the recommendations a scale-down waits out. State is in memory: a restarted controller
// starts with no data, which keeps each pool as it is until members start again.
type Demand struct {
	// RateWindow is how far back claims are counted; Window is the stabilization window.
	RateWindow, Window time.Duration

	mu    sync.Mutex
	pools map[string]*observed
	// followed holds members claimed before they were Ready: their start-up time still counts
	// for the pool, or a pool whose members are all taken early would never learn it.
	followed map[types.UID]follow
	// claimPools holds the pool of each recent claim, by claim UID: a claim is counted once, and
	// the start-up time of a cold Sandbox it gets counts for its pool, or a pool that ran dry (or
	// waits at zero) would never learn it.
	claimPools map[types.UID]follow
}

type observed struct {
	claims  []time.Time
	ready   []time.Duration // ring of the last readySamples
	next    int
	history []Recommendation
}

type follow struct {
	pool    string
	created time.Time
	// cold marks a claim whose cold Sandbox's start-up time was recorded.
	cold bool
}

// NewDemand returns a Demand with the given rate and stabilization windows.
func NewDemand(rateWindow, window time.Duration) *Demand {
	return &Demand{RateWindow: rateWindow, Window: window, pools: map[string]*observed{},
		followed: map[types.UID]follow{}, claimPools: map[types.UID]follow{}}
}

func (d *Demand) get(pool string) *observed {
	o := d.pools[pool]
	if o == nil {
		o = &observed{}
		d.pools[pool] = o
	}
	return o
}

// Claim records a claim of pool made at at: one claim, whether a member serves it or a cold
// Sandbox does. A claim already recorded, or made before the rate window, counts for nothing.
func (d *Demand) Claim(pool string, claim types.UID, at, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.claimPools[claim]; seen || !at.After(now.Add(-d.RateWindow)) {
		return
	}
	o := d.get(pool)
	o.claims = recent(o.claims, now.Add(-d.RateWindow))
	i, _ := slices.BinarySearchFunc(o.claims, at, func(t, at time.Time) int { return t.Compare(at) })
	o.claims = slices.Insert(o.claims, i, at)
	if len(o.claims) > maxClaims {
		o.claims = o.claims[len(o.claims)-maxClaims:]
	}
	add(d.claimPools, claim, follow{pool: pool, created: at}, now)
}

// MemberTaken records that a member of pool, created at created, left it for a claim at now,
// Ready or not: one taken before it was Ready is followed for its start-up time. The claim itself
// is counted by Claim.
func (d *Demand) MemberTaken(pool string, uid types.UID, created time.Time, ready bool, now time.Time) {
	if ready {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	add(d.followed, uid, follow{pool: pool, created: created}, now)
}

// add keeps f under uid unless m is full of entries younger than followFor.
func add(m map[types.UID]follow, uid types.UID, f follow, now time.Time) {
	if len(m) >= maxFollowed {
		for id, old := range m {
			if now.Sub(old.created) > followFor {
				delete(m, id)
			}
		}
	}
	if len(m) < maxFollowed {
		m[uid] = f
	}
}

// Ready records that a member of pool created at created turned Ready at now.
func (d *Demand) Ready(pool string, created, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sample(pool, now.Sub(created))
}

// ReadyAfterClaim records the start-up time of a Sandbox that turned Ready at now, if it was
// claimed from a pool before it was Ready.
func (d *Demand) ReadyAfterClaim(uid types.UID, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.followed[uid]
	if !ok {
		return
	}
	delete(d.followed, uid)
	if took := now.Sub(f.created); took <= followFor {
		d.sample(f.pool, took)
	}
}

// ColdReady records the start-up time of a cold Sandbox, created at created and Ready at now,
// that serves claim, if the claim was recorded: a cold Sandbox of a pool's claim starts from the
// pool's template as a member does.
func (d *Demand) ColdReady(claim types.UID, created, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.claimPools[claim]
	if !ok || f.cold {
		return
	}
	f.cold = true
	d.claimPools[claim] = f
	if took := now.Sub(created); took <= followFor {
		d.sample(f.pool, took)
	}
}

// Gone forgets a Sandbox or a claim that was deleted.
func (d *Demand) Gone(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.followed, uid)
	delete(d.claimPools, uid)
}

func (d *Demand) sample(pool string, took time.Duration) {
	o := d.get(pool)
	took = max(took, 0)
	if len(o.ready) < readySamples {
		o.ready = append(o.ready, took)
		return
	}
	o.ready[o.next] = took
	o.next = (o.next + 1) % readySamples
}

// Decide makes pool's sizing decision from what was recorded, and keeps its history for the
// next one.
func (d *Demand) Decide(pool string, p Policy, current int32, now time.Time) Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.get(pool)
	o.claims = recent(o.claims, now.Add(-d.RateWindow))
	dec := Decide(Input{Policy: p, Current: current, Claims: o.claims, RateWindow: d.RateWindow,
		ReadyTimes: o.ready, History: o.history, Window: d.Window, Now: now})
	o.history = dec.History
	return dec
}

// Forget drops what is known about a pool that is gone.
func (d *Demand) Forget(pool string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pools, pool)
	for _, m := range []map[types.UID]follow{d.followed, d.claimPools} {
		for id, f := range m {
			if f.pool == pool {
				delete(m, id)
			}
		}
	}
}

// ForgetDecisions drops a pool's recommendation history (autosize was turned off), keeping its
// observations: turned on again, it starts from its spec.replicas as after a restart.
func (d *Demand) ForgetDecisions(pool string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.pools[pool]; o != nil {
		o.history = nil
	}
}
