package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScenarioValidate(t *testing.T) {
	ok := Scenario{Kind: KindWarm, PoolSize: 5, Count: 10, Rate: 5, Timeout: time.Minute}
	tests := []struct {
		name   string
		mutate func(*Scenario)
		want   string
	}{
		{name: "valid", mutate: func(*Scenario) {}},
		{name: "kind", mutate: func(s *Scenario) { s.Kind = "hot" }, want: `scenario kind "hot"`},
		{name: "count", mutate: func(s *Scenario) { s.Count = 0 }, want: "count 0"},
		{name: "pool", mutate: func(s *Scenario) { s.PoolSize = 0 }, want: "pool size 0"},
		{name: "cold needs no pool", mutate: func(s *Scenario) { s.Kind, s.PoolSize = KindCold, 0 }},
		{name: "rate", mutate: func(s *Scenario) { s.Rate = -1 }, want: "rate -1"},
		{name: "timeout", mutate: func(s *Scenario) { s.Timeout = 0 }, want: "timeout 0s"},
		{name: "runtime", mutate: func(s *Scenario) { s.Kind, s.PoolSize, s.LoadRequests, s.Concurrency = KindRuntime, 0, 100, 4 }},
		{name: "runtime without load", mutate: func(s *Scenario) { s.Kind, s.LoadRequests, s.Concurrency = KindRuntime, 0, 0 }},
		{name: "runtime load", mutate: func(s *Scenario) { s.Kind, s.LoadRequests = KindRuntime, -1 }, want: "load requests -1"},
		{name: "runtime clients", mutate: func(s *Scenario) { s.Kind, s.LoadRequests, s.Concurrency = KindRuntime, 10, 0 }, want: "concurrency 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mutate(&s)
			err := s.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// TestResult checks the bookkeeping from create and Ready times to samples and statistics.
func TestResult(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := newTracker(4)
	tr.start("claim-00000", at(0))
	tr.start("claim-00001", at(200))
	tr.start("claim-00002", at(400))
	tr.start("claim-00003", at(600))
	tr.observe("claim-00001", at(250))
	tr.observe("claim-00000", at(100))
	tr.observe("claim-00000", at(900)) // a later event does not move the first Ready
	tr.fail("claim-00002", errors.New("admission webhook said no"))
	// claim-00003 never became Ready.
	s := Scenario{Kind: KindWarm, PoolSize: 2, Count: 4, Rate: 5}
	got := result(s, t0, tr)
	want := Result{
		Name: "warm 5/s, 4 claims, pool 2", Kind: KindWarm, Count: 4, Rate: 5, PoolSize: 2,
		Ready: 2, Failed: 1,
		Latency:         Summary{N: 2, P50: 0.05, P90: 0.1, P99: 0.1, Max: 0.1},
		AllReadySeconds: 0.25,
		Writes:          Writes{},
		Samples: []Sample{
			{Name: "claim-00000", StartSeconds: 0, LatencySeconds: 0.1, Ready: true},
			{Name: "claim-00001", StartSeconds: 0.2, LatencySeconds: 0.05, Ready: true},
			{Name: "claim-00002", StartSeconds: 0.4, Error: "admission webhook said no"},
			{Name: "claim-00003", StartSeconds: 0.6},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	select {
	case <-tr.done:
		t.Error("tracker reports done with one object still pending")
	default:
	}
	tr.observe("claim-00003", at(700))
	select {
	case <-tr.done:
	default:
		t.Error("tracker not done after every object was Ready or failed")
	}
}
