package warmpool

import (
	"math"
	"sync"
	"time"
)

// Shaping paces a pool's refills: an optional delay after its active count drops (so a burst of
// claims is not chased member by member) and an optional per-pool rate limit on creates. State
// is in memory, per pool; a restarted controller starts with full buckets and no delay armed.
type Shaping struct {
	// ReplenishDelay defers creates this long after the active count last dropped; 0 disables.
	ReplenishDelay time.Duration
	// MaxRefillRate caps creates per second per pool, with a bucket of max(1, rate) tokens that
	// starts full; 0 disables.
	MaxRefillRate float64

	mu    sync.Mutex
	pools map[string]*shape
}

type shape struct {
	observed   bool
	lastActive int
	dropAt     time.Time
	tokens     float64
	filledAt   time.Time
}

// Allow returns how many of want creates may go now, given the pool's active count, and when to
// look again if some were held back (0 when none were).
func (s *Shaping) Allow(pool string, want, active int, now time.Time) (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools == nil {
		s.pools = map[string]*shape{}
	}
	p := s.pools[pool]
	if p == nil {
		p = &shape{tokens: s.capacity(), filledAt: now}
		s.pools[pool] = p
	}
	if p.observed && active < p.lastActive {
		p.dropAt = now
	}
	p.observed, p.lastActive = true, active
	if want <= 0 {
		return 0, 0
	}
	if s.ReplenishDelay > 0 && !p.dropAt.IsZero() {
		if wait := p.dropAt.Add(s.ReplenishDelay).Sub(now); wait > 0 {
			return 0, wait
		}
	}
	if s.MaxRefillRate <= 0 {
		return want, 0
	}
	p.tokens = math.Min(s.capacity(), p.tokens+now.Sub(p.filledAt).Seconds()*s.MaxRefillRate)
	p.filledAt = now
	n := min(want, int(p.tokens))
	p.tokens -= float64(n)
	if n == want {
		return n, 0
	}
	return n, time.Duration((1 - (p.tokens - math.Floor(p.tokens))) / s.MaxRefillRate * float64(time.Second))
}

// Forget drops a pool's state.
func (s *Shaping) Forget(pool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pools, pool)
}

func (s *Shaping) capacity() float64 { return math.Max(1, s.MaxRefillRate) }
