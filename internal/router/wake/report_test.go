package wake

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
)

// fakeSandboxes is a Lookup and Patcher over in-memory Sandboxes; merge patches set annotations.
type fakeSandboxes struct {
	mu      sync.Mutex
	byName  map[string]*agentsv1beta1.Sandbox
	patches []string
}

func (f *fakeSandboxes) Sandbox(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[ns+"/"+name].DeepCopy(), nil
}

func (f *fakeSandboxes) JSONPatch(context.Context, string, string, []byte) error { return nil }

func (f *fakeSandboxes) MergePatch(_ context.Context, ns, name string, patch []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var p struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	sb := f.byName[ns+"/"+name]
	for k, v := range p.Metadata.Annotations {
		metav1.SetMetaDataAnnotation(&sb.ObjectMeta, k, v)
	}
	f.patches = append(f.patches, name)
	return nil
}

func TestReporterWritesAtMostOncePerMinuteAndNeverWithoutTraffic(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	sbs := &fakeSandboxes{byName: map[string]*agentsv1beta1.Sandbox{
		"ns/tracked":   {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tracked", Annotations: map[string]string{agentsv1beta1.LastActivityAnnotation: activity.Format(start)}}},
		"ns/untracked": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "untracked"}},
	}}
	r := NewReporter(sbs, sbs, clock, logr.Discard())
	ctx := context.Background()

	// Traffic every second for three minutes, flushed every 30s: one write per minute at most.
	for i := range 180 {
		clock.Step(time.Second)
		r.Seen("ns", "tracked")
		r.Seen("ns", "untracked")
		if i%30 == 29 {
			r.Flush(ctx)
		}
	}
	if diff := cmp.Diff([]string{"tracked", "tracked", "tracked"}, sbs.patches); diff != "" {
		t.Errorf("writes over three minutes of traffic (-want +got):\n%s", diff)
	}
	// No traffic: no writes, however often it flushes.
	before := len(sbs.patches)
	for range 10 {
		clock.Step(time.Minute)
		r.Flush(ctx)
	}
	if n := len(sbs.patches) - before; n != 0 {
		t.Errorf("%d writes without traffic, want 0", n)
	}
	if got, want := sbs.byName["ns/tracked"].Annotations[agentsv1beta1.LastActivityAnnotation], activity.Format(start.Add(180*time.Second)); got != want {
		t.Errorf("recorded activity %s, want the last request %s", got, want)
	}
}
