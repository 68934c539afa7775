// Package warmqueue is the in-memory queue of warm-pool members a claim may adopt, one FIFO per
// pool. Pop hands each member to one caller at a time, so concurrent claim reconciles of one
// process never race for the same Sandbox; the optimistic-lock adoption patch covers the rest.
package warmqueue

import (
	"sync"
)

// Key identifies a pool's queue: the pool's namespace and name.
type Key struct{ Namespace, Pool string }

// Member is a queued Sandbox.
type Member struct {
	Name string
	// NodeName is where the member's Pod runs, when known; Pop spreads adoptions across nodes.
	NodeName string
}

// Queues holds every pool's queue. The zero value is not usable; call New.
type Queues struct {
	mu     sync.Mutex
	queues map[Key][]Member
}

// New returns empty queues.
func New() *Queues { return &Queues{queues: map[Key][]Member{}} }

// Add queues a member at the back, or updates its node in place when it is queued already.
func (q *Queues) Add(k Key, m Member) {
	q.mu.Lock()
	defer q.mu.Unlock()
	members := q.queues[k]
	for i := range members {
		if members[i].Name == m.Name {
			members[i].NodeName = m.NodeName
			return
		}
	}
	q.queues[k] = append(members, m)
}

// Remove drops a member from its pool's queue.
func (q *Queues) Remove(k Key, name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	members := q.queues[k]
	for i := range members {
		if members[i].Name == name {
			q.queues[k] = append(members[:i:i], members[i+1:]...)
			break
		}
	}
	if len(q.queues[k]) == 0 {
		delete(q.queues, k)
	}
}

// DropPool forgets a pool's whole queue.
func (q *Queues) DropPool(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.queues, k)
}

// Len is the number of queued members of a pool.
func (q *Queues) Len(k Key) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queues[k])
}

// Pop removes and returns the next member of a pool: FIFO, except that when members report
// nodes it takes the earliest member of the node with the most queued members, so adoptions
// drain crowded nodes first.
func (q *Queues) Pop(k Key) (Member, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	members := q.queues[k]
	if len(members) == 0 {
		return Member{}, false
	}
	i := pick(members)
	m := members[i]
	q.queues[k] = append(members[:i:i], members[i+1:]...)
	if len(q.queues[k]) == 0 {
		delete(q.queues, k)
	}
	return m, true
}

// pick returns the index Pop takes.
func pick(members []Member) int {
	perNode := map[string]int{}
	for _, m := range members {
		if m.NodeName != "" {
			perNode[m.NodeName]++
		}
	}
	if len(perNode) == 0 {
		return 0
	}
	best := -1
	for i, m := range members {
		if m.NodeName == "" {
			continue
		}
		if best < 0 || perNode[m.NodeName] > perNode[members[best].NodeName] {
			best = i
		}
	}
	return best
}
