package sandbox

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestWrittenVersions(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "sb"}
	var w writtenVersions
	if w.stale(key, "5") {
		t.Fatalf("stale without any write")
	}
	w.record(key, "5", "5")
	if w.stale(key, "4") {
		t.Fatalf("a pass that wrote nothing made the cache stale")
	}
	w.record(key, "5", "9")
	for _, tt := range []struct {
		cached string
		want   bool
	}{
		{"8", true},   // older than our write
		{"10", false}, // caught up (and the record is dropped)
		{"8", false},  // nothing remembered any more
	} {
		if got := w.stale(key, tt.cached); got != tt.want {
			t.Errorf("stale(%s) = %v, want %v", tt.cached, got, tt.want)
		}
	}
	w.record(key, "10", "12")
	if w.stale(key, "not-a-number") {
		t.Errorf("an incomparable version must never be called stale")
	}
	w.record(key, "12", "14")
	w.forget(key)
	if w.stale(key, "13") {
		t.Errorf("stale after forget")
	}
}
