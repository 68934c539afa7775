package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/internal/devcluster"
)

// TestDefaultRuntimeImageIsTheDevClusters keeps the runtime scenario's default image the one
// `paddock dev up` builds.
func TestDefaultRuntimeImageIsTheDevClusters(t *testing.T) {
	if want := devcluster.Defaults("/var/lib/paddock-dev").SandboxImage(); DefaultRuntimeImage != want {
		t.Errorf("DefaultRuntimeImage = %q, want the dev cluster's sandbox image %q", DefaultRuntimeImage, want)
	}
}

// counting returns a request that records its calls in order under label and fails on call
// number failAt (from 1; 0 never fails).
func counting(calls *[]string, label string, failAt int) request {
	n := 0
	return func(context.Context) error {
		n++
		*calls = append(*calls, label)
		if n == failAt {
			return errors.New("connection refused")
		}
		return nil
	}
}

func TestRoundTrips(t *testing.T) {
	t.Run("direct and routed alternate after the warm-up, which is not measured", func(t *testing.T) {
		var calls []string
		direct, routed, err := roundTrips(t.Context(), 5, counting(&calls, "d", 0), counting(&calls, "r", 0))
		if err != nil {
			t.Fatal(err)
		}
		if direct.N != 5 || routed.N != 5 {
			t.Errorf("samples: direct %d, routed %d; want 5 each (the %d warm-up requests excluded)", direct.N, routed.N, runtimeWarmup)
		}
		want := strings.Repeat("dr", runtimeWarmup+5)
		if got := strings.Join(calls, ""); got != want {
			t.Errorf("call order %q, want %q", got, want)
		}
	})
	t.Run("no router", func(t *testing.T) {
		var calls []string
		direct, routed, err := roundTrips(t.Context(), 3, counting(&calls, "d", 0), nil)
		if err != nil || direct.N != 3 || routed.N != 0 || len(calls) != runtimeWarmup+3 {
			t.Errorf("roundTrips without a router = %+v, %+v, %v after %d calls; want 3 direct samples, none routed", direct, routed, err, len(calls))
		}
	})
	t.Run("a failure names the request and the path", func(t *testing.T) {
		var calls []string
		_, _, err := roundTrips(t.Context(), 5, counting(&calls, "d", 0), counting(&calls, "r", 12))
		if err == nil || !strings.Contains(err.Error(), "request 12 (routed): connection refused") {
			t.Errorf("roundTrips with a failing routed request = %v, want it to name request 12 (routed)", err)
		}
	})
	t.Run("out of time keeps what was measured", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		send := func(ctx context.Context) error {
			n++
			if n == runtimeWarmup+3 {
				cancel()
				return ctx.Err()
			}
			return nil
		}
		direct, _, err := roundTrips(ctx, 100, send, nil)
		if err != nil || direct.N != 2 {
			t.Errorf("roundTrips cut short = %+v, %v; want the 2 samples before the deadline and no error", direct, err)
		}
	})
}

func TestRunLoad(t *testing.T) {
	var sent, inFlight, most atomic.Int64
	send := func(context.Context) error {
		n := sent.Add(1)
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if cur <= m || most.CompareAndSwap(m, cur) {
				break
			}
		}
		if n%10 == 0 {
			return errors.New("503")
		}
		return nil
	}
	l := runLoad(t.Context(), 4, 200, send)
	got := []int{l.Concurrency, l.Requests, l.Errors, l.Latency.N, int(sent.Load())}
	if diff := cmp.Diff([]int{4, 200, 20, 180, 200}, got); diff != "" {
		t.Errorf("load (concurrency, requests, errors, samples, calls) (-want +got):\n%s", diff)
	}
	if most.Load() > 4 {
		t.Errorf("%d requests were in flight at once, want at most 4", most.Load())
	}
	if l.Seconds <= 0 || l.PerSecond != float64(180)/l.Seconds {
		t.Errorf("rate %v over %v s, want the 180 successes divided by the elapsed time", l.PerSecond, l.Seconds)
	}
}

func TestRunLoadStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var sent atomic.Int64
	l := runLoad(ctx, 2, 1_000_000, func(context.Context) error {
		if sent.Add(1) == 50 {
			cancel()
		}
		return nil
	})
	if l.Requests >= 1_000_000 || l.Requests < 50 {
		t.Errorf("a load cancelled after 50 requests sent %d", l.Requests)
	}
}

func TestMicroseconds(t *testing.T) {
	for in, want := range map[float64]string{0.000048: "48 µs", 0.00093: "930 µs", 0.00161: "1.61 ms", 0.0123: "12 ms", -0.0001: "-100 µs", 12: "12.0 s"} {
		if got := microseconds(in); got != want {
			t.Errorf("microseconds(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestCompareRuntime(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	run := func(image string, execP50, rps float64) *Report {
		return &Report{Conditions: Conditions{ControllerImage: image, Time: at}, Scenarios: []Result{{Name: "runtime", Kind: KindRuntime,
			Runtime: &Runtime{Exec: Summary{N: 1, P50: execP50}, ExecRouted: Summary{N: 1, P50: 2 * execP50}, HealthRouted: Summary{N: 1, P50: 0.0002},
				LoadRouted: Load{PerSecond: rps}}}}}
	}
	got := CompareMarkdown(run("a", 0.001, 8000), run("b", 0.0005, 10000))
	for _, row := range []string{
		"| runtime | exec p50, direct | 1.00 ms | 500 µs | 0.50 |",
		"| runtime | exec p50, routed | 2.00 ms | 1.00 ms | 0.50 |",
		"| runtime | routed requests/s | 8000 | 10000 | 1.25 |",
	} {
		if !strings.Contains(got, row) {
			t.Errorf("comparison lacks %q:\n%s", row, got)
		}
	}
	if strings.Contains(got, "| runtime | p50 |") {
		t.Errorf("comparison shows claim latencies for a runtime scenario:\n%s", got)
	}
}
