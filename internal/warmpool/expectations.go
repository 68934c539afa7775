package warmpool

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ExpectationsTimeout is how long unobserved creates or deletes hold a pool back before the
// pool trusts its cache again (a lost watch event must not stall a pool forever).
const ExpectationsTimeout = 5 * time.Minute

// Expectations counts, per pool, the creates and deletes issued but not yet seen in the watch.
// A pool only creates or scales down when its expectations are satisfied, so a lagging cache
// never makes it act twice on the same shortfall.
type Expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	pools map[string]*pending
}

type pending struct {
	creates int
	// unlisted holds members whose create succeeded but that the pool's member list has not
	// shown yet. The count above follows watch events; this follows the list the plan is made
	// from, so that a plan never counts fewer members than were created.
	unlisted map[types.UID]bool
	deletes  map[types.UID]bool
	since    time.Time
}

// NewExpectations returns empty expectations reading time from now.
func NewExpectations(now func() time.Time) *Expectations {
	return &Expectations{now: now, pools: map[string]*pending{}}
}

func (e *Expectations) get(pool string) *pending {
	p := e.pools[pool]
	if p == nil {
		p = &pending{deletes: map[types.UID]bool{}, unlisted: map[types.UID]bool{}}
		e.pools[pool] = p
	}
	p.since = e.now()
	return p
}

// ExpectCreates records n creates about to be issued. Call it before the creates: their watch
// events may arrive before the calls return.
func (e *Expectations) ExpectCreates(pool string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(pool).creates += n
}

// CreationObserved lowers the creates of a pool by one: a member appeared, or a create failed.
func (e *Expectations) CreationObserved(pool string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pools[pool]; p != nil && p.creates > 0 {
		p.creates--
	}
}

// Created records a member whose create succeeded; it counts as unobserved until Listed or
// Left sees it.
func (e *Expectations) Created(pool string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(pool).unlisted[uid] = true
}

// Listed marks the members of a pool's member list as observed.
func (e *Expectations) Listed(pool string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pools[pool]
	if p == nil || len(p.unlisted) == 0 {
		return
	}
	for _, uid := range uids {
		delete(p.unlisted, uid)
	}
}

// Left marks a member that left the pool (adopted or deleted) as observed: no list will show it.
func (e *Expectations) Left(pool string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pools[pool]; p != nil {
		delete(p.unlisted, uid)
	}
}

// ExpectDelete records a delete about to be issued.
func (e *Expectations) ExpectDelete(pool string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(pool).deletes[uid] = true
}

// DeletionObserved forgets an expected delete: the member is gone, or the delete failed.
func (e *Expectations) DeletionObserved(pool string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pools[pool]; p != nil {
		delete(p.deletes, uid)
	}
}

// DeletePending reports whether the pool deleted uid and has not seen it go.
func (e *Expectations) DeletePending(pool string, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pools[pool]
	return p != nil && p.deletes[uid]
}

// Satisfied reports whether every create and delete of the pool has been observed, or the
// oldest unobserved one is older than ExpectationsTimeout.
func (e *Expectations) Satisfied(pool string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pools[pool]
	if p == nil || (p.creates == 0 && len(p.unlisted) == 0 && len(p.deletes) == 0) {
		return true
	}
	if e.now().Sub(p.since) > ExpectationsTimeout {
		// The events were lost; start afresh rather than carry counts that will never drain.
		delete(e.pools, pool)
		return true
	}
	return false
}

// Forget drops a pool's expectations, when the pool is gone.
func (e *Expectations) Forget(pool string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pools, pool)
}
