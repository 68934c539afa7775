package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestPodRetryBackoff(t *testing.T) {
	want := map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second,
		7: time.Minute, 8: time.Minute, 1000: time.Minute}
	got := map[int]time.Duration{}
	for n := range want {
		got[n] = podRetryBackoff(n)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("podRetryBackoff (-want +got):\n%s", diff)
	}
}

func TestPodRetryAtRoundsUpToTheSecond(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		now  time.Time
		want time.Time
	}{
		{t0, t0.Add(time.Second)},
		{t0.Add(300 * time.Millisecond), t0.Add(2 * time.Second)},
	} {
		if diff := cmp.Diff(tt.want, podRetryAt(1, tt.now)); diff != "" {
			t.Errorf("podRetryAt(1, %v) (-want +got):\n%s", tt.now, diff)
		}
	}
}

// Rejections in a row lengthen the wait; the same Pod seen twice counts once; a started Pod ends
// the run, and nothing is kept of it.
func TestRememberRejection(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "sb"}
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 0, time.UTC)
	m := newWriteMemory(0, 0)
	if _, wait := m.heldRejection(key, t0); wait != 0 {
		t.Fatalf("a Sandbox never rejected is held back %v", wait)
	}

	first, fresh := m.rememberRejection(key, podRejection{podUID: "u1", pod: "sb", reason: "OutOfmemory"}, t0)
	if !fresh || first.count != 1 || !first.retryAt.Equal(t0.Add(time.Second)) {
		t.Errorf("first rejection = %+v fresh %v, want count 1, retry at %v", first, fresh, t0.Add(time.Second))
	}
	again, fresh := m.rememberRejection(key, podRejection{podUID: "u1", pod: "sb", reason: "OutOfmemory"}, t0.Add(500*time.Millisecond))
	if fresh || again != first {
		t.Errorf("the same pod seen again = %+v fresh %v, want %+v unchanged", again, fresh, first)
	}
	if _, wait := m.heldRejection(key, t0.Add(400*time.Millisecond)); wait != 600*time.Millisecond {
		t.Errorf("held back %v, want 600ms", wait)
	}
	if _, wait := m.heldRejection(key, t0.Add(time.Second)); wait != 0 {
		t.Errorf("still held back %v at the retry time", wait)
	}

	second, fresh := m.rememberRejection(key, podRejection{podUID: "u2", pod: "sb", reason: "OutOfcpu"}, t0.Add(2*time.Second))
	if !fresh || second.count != 2 || !second.retryAt.Equal(t0.Add(4*time.Second)) || second.reason != "OutOfcpu" {
		t.Errorf("second rejection = %+v fresh %v, want count 2, OutOfcpu, retry at %v", second, fresh, t0.Add(4*time.Second))
	}

	m.forgetRejections(key)
	if diff := cmp.Diff(0, m.remembered()); diff != "" {
		t.Errorf("Sandboxes remembered after the run of rejections ended (-want +got):\n%s", diff)
	}
	third, _ := m.rememberRejection(key, podRejection{podUID: "u3"}, t0.Add(10*time.Second))
	if third.count != 1 {
		t.Errorf("a rejection after a started pod counts %d in a row, want 1", third.count)
	}
}
