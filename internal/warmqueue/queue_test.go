package warmqueue

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPopOrder(t *testing.T) {
	tests := []struct {
		name    string
		members []Member
		want    []string
	}{
		{"empty", nil, nil},
		{"FIFO without nodes", []Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}, []string{"a", "b", "c"}},
		{
			"most crowded node first, earliest on ties",
			[]Member{{Name: "a", NodeName: "n1"}, {Name: "b", NodeName: "n2"}, {Name: "c", NodeName: "n2"}, {Name: "d"}},
			[]string{"b", "a", "c", "d"},
		},
		{"re-add updates the node and keeps the position", []Member{{Name: "a"}, {Name: "b"}, {Name: "a", NodeName: "n1"}}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, k := New(), Key{"ns", "pool"}
			for _, m := range tt.members {
				q.Add(k, m)
			}
			var got []string
			for {
				m, ok := q.Pop(k)
				if !ok {
					break
				}
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pop order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemoveAndDropPool(t *testing.T) {
	q, k, other := New(), Key{"ns", "pool"}, Key{"ns", "other"}
	for _, n := range []string{"a", "b", "c"} {
		q.Add(k, Member{Name: n})
	}
	q.Add(other, Member{Name: "x"})
	q.Remove(k, "b")
	q.Remove(k, "missing")
	if got := q.Len(k); got != 2 {
		t.Errorf("Len after Remove = %d, want 2", got)
	}
	q.DropPool(k)
	if got := q.Len(k); got != 0 {
		t.Errorf("Len after DropPool = %d, want 0", got)
	}
	if got := q.Len(other); got != 1 {
		t.Errorf("DropPool touched another pool: Len = %d, want 1", got)
	}
}

// TestConcurrentPopHandsOutEachMemberOnce is the in-process half of exactly-once adoption.
func TestConcurrentPopHandsOutEachMemberOnce(t *testing.T) {
	q, k := New(), Key{"ns", "pool"}
	const n = 1000
	for i := range n {
		q.Add(k, Member{Name: string(rune('a'+i%26)) + string(rune(i))})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				m, ok := q.Pop(k)
				if !ok {
					return
				}
				mu.Lock()
				seen[m.Name]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("popped %d distinct members, want %d", len(seen), n)
	}
	for name, c := range seen {
		if c != 1 {
			t.Errorf("member %q popped %d times", name, c)
		}
	}
}
