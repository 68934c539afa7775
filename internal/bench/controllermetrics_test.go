package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const controllerMetricsText = `# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2582912e+08
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 42.5
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7644e+09
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 6.4e+07
# TYPE workqueue_depth gauge
workqueue_depth{controller="sandbox",name="sandbox"} 3
workqueue_depth{controller="sandboxclaim",name="sandboxclaim"} 1
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="sandbox",name="sandbox"} 10000
workqueue_adds_total{controller="sandboxclaim",name="sandboxclaim"} 20
# TYPE workqueue_unfinished_work_seconds gauge
workqueue_unfinished_work_seconds{controller="sandbox",name="sandbox"} 0.25
workqueue_unfinished_work_seconds{controller="sandboxclaim",name="sandboxclaim"} 0
`

func TestParseControllerMetrics(t *testing.T) {
	got, err := ParseControllerMetrics(strings.NewReader(controllerMetricsText))
	if err != nil {
		t.Fatal(err)
	}
	want := ControllerMetrics{
		RSSBytes: 120 << 20, CPUSeconds: 42.5, HeapInuseBytes: 64e6, StartTimeSeconds: 1.7644e9,
		QueueDepth: 4, QueueAdds: 10020, QueueUnfinishedS: 0.25, HasWorkqueueStats: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseControllerMetrics (-want +got):\n%s", diff)
	}
	if got.Idle() {
		t.Error("Idle() with 4 queued items = true, want false")
	}
}

func TestParseControllerMetricsWithoutWorkqueues(t *testing.T) {
	got, err := ParseControllerMetrics(strings.NewReader("process_resident_memory_bytes 10\nprocess_cpu_seconds_total 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ControllerMetrics{RSSBytes: 10, CPUSeconds: 1}, got); diff != "" {
		t.Errorf("ParseControllerMetrics (-want +got):\n%s", diff)
	}
}

func TestParseControllerMetricsErrors(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"no process collector": {text: "workqueue_depth 0\n", want: "no process_"},
		"not metrics":          {text: "<html>", want: "parsing the controller's metrics"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseControllerMetrics(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
