package bench

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ControllerMetrics is what the harness reads from a controller's Prometheus endpoint: the
// process collector's memory and CPU, which every Go controller exports, and the workqueue
// metrics of controller-runtime (and of client-go's workqueue), summed over all queues.
type ControllerMetrics struct {
	RSSBytes       float64 `json:"rssBytes"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	HeapInuseBytes float64 `json:"heapInuseBytes,omitempty"`
	// StartTimeSeconds is when the process started, in seconds since the Unix epoch.
	StartTimeSeconds  float64 `json:"startTimeSeconds,omitempty"`
	QueueDepth        float64 `json:"queueDepth"`
	QueueAdds         float64 `json:"queueAdds"`
	QueueUnfinishedS  float64 `json:"queueUnfinishedSeconds"`
	HasWorkqueueStats bool    `json:"hasWorkqueueStats"`
}

// Idle says whether the controller has nothing queued and nothing in flight.
func (m ControllerMetrics) Idle() bool { return m.QueueDepth == 0 && m.QueueUnfinishedS == 0 }

// ParseControllerMetrics reads a controller's /metrics text. The process metrics are required:
// without them there is no memory to report.
func ParseControllerMetrics(r io.Reader) (ControllerMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return ControllerMetrics{}, fmt.Errorf("parsing the controller's metrics (is this a Prometheus /metrics page?): %w", err)
	}
	var m ControllerMetrics
	for name, dst := range map[string]*float64{
		"process_resident_memory_bytes": &m.RSSBytes,
		"process_cpu_seconds_total":     &m.CPUSeconds,
	} {
		f, ok := families[name]
		if !ok {
			return ControllerMetrics{}, fmt.Errorf("the controller's metrics have no %s; it needs the Prometheus process collector (controller-runtime registers it)", name)
		}
		*dst = sum(f)
	}
	if f, ok := families["go_memstats_heap_inuse_bytes"]; ok {
		m.HeapInuseBytes = sum(f)
	}
	if f, ok := families["process_start_time_seconds"]; ok {
		m.StartTimeSeconds = sum(f)
	}
	for name, dst := range map[string]*float64{
		"workqueue_depth":                   &m.QueueDepth,
		"workqueue_adds_total":              &m.QueueAdds,
		"workqueue_unfinished_work_seconds": &m.QueueUnfinishedS,
	} {
		if f, ok := families[name]; ok {
			*dst = sum(f)
			m.HasWorkqueueStats = true
		}
	}
	return m, nil
}

// sum adds up every series of a counter or gauge family.
func sum(f *dto.MetricFamily) float64 {
	var total float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}
