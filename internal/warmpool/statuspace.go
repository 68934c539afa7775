package warmpool

import (
	"sync"
	"time"
)

// StatusPacer spaces out a pool's status writes that only move its replica counts. Every claim
// takes a member and every refill adds one, so without pacing a busy pool's status, an object
// shared by all its claims, would be rewritten several times per claim. Count-only changes are
// written at most once per Interval; any other change (observed generation, selector) at once.
type StatusPacer struct {
	// Interval is the least time between two count-only writes of one pool; 0 disables pacing.
	Interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
}

// Wait returns how long a status write of pool must wait: 0 to write now. countsOnly says the
// write changes nothing but replica counts.
func (p *StatusPacer) Wait(pool string, countsOnly bool, now time.Time) time.Duration {
	if !countsOnly || p.Interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[pool]
	if !ok {
		return 0
	}
	if elapsed := now.Sub(last); elapsed < p.Interval {
		return p.Interval - elapsed
	}
	return 0
}

// Wrote records that pool's status was written at now.
func (p *StatusPacer) Wrote(pool string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[string]time.Time{}
	}
	p.last[pool] = now
}

// Forget drops what is known about a pool that is gone.
func (p *StatusPacer) Forget(pool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, pool)
}
