package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is everything one run of the harness measured, with the conditions it ran under.
type Report struct {
	Conditions Conditions `json:"conditions"`
	Scenarios  []Result   `json:"scenarios"`
}

// Conditions describe what the numbers were measured on; a number without them means little.
type Conditions struct {
	Time          time.Time `json:"time"`
	GitCommit     string    `json:"gitCommit"`
	GoVersion     string    `json:"goVersion"`
	ServerVersion string    `json:"serverVersion"`
	Nodes         int       `json:"nodes"`
	// Objects counts objects present in the whole cluster when the run started, by resource.
	Objects map[string]int `json:"objects"`
	// LoadAverage is the harness machine's 1, 5 and 15 minute load average at the start
	// (/proc/loadavg), empty where there is none.
	LoadAverage string `json:"loadAverage,omitempty"`
	// ControllerImage is the image the controller Deployment ran (set by --compare).
	ControllerImage string `json:"controllerImage,omitempty"`
	// Command is the command line that produced the report, to repeat it.
	Command string `json:"command,omitempty"`
	// Note is free text from the operator: where the control plane ran, fsync, load.
	Note string `json:"note,omitempty"`
}

// Kind of a scenario.
const (
	KindWarm = "warm"
	KindCold = "cold"
	KindHold = "hold"
	// KindRuntime measures sandboxd and the router in front of one real sandbox.
	KindRuntime = "runtime"
	// KindE2B measures E2B creates and first commands through paddock-router's E2B front door.
	KindE2B = "e2b"
)

// Result is one scenario's outcome.
type Result struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Count is how many claims (warm) or Sandboxes (cold) the scenario created.
	Count int `json:"count"`
	// Rate is the creation rate per second; 0 means all at once.
	Rate     float64 `json:"rate"`
	PoolSize int     `json:"poolSize,omitempty"`
	// Ready is how many objects reached Ready=True before the timeout; Failed how many could not
	// be created.
	Ready   int     `json:"ready"`
	Failed  int     `json:"failed"`
	Latency Summary `json:"latency"`
	// AllReadySeconds runs from just before the first create call to the last Ready event.
	AllReadySeconds float64 `json:"allReadySeconds"`
	// RefillSeconds is how long the pool took to be full again after the last claim was Ready;
	// RefillComplete says whether it did before the refill window closed.
	RefillSeconds  float64 `json:"refillSeconds,omitempty"`
	RefillComplete bool    `json:"refillComplete,omitempty"`
	// Writes are the API writes during the phase (and refill), by verb and resource.
	Writes Writes `json:"writes"`
	// Reads are the GET and LIST requests from the first create to the last Ready, by verb and
	// resource (warm and cold scenarios): whatever the controllers read past their caches.
	Reads Writes `json:"reads,omitempty"`
	// ObjectsBefore counts objects present in the cluster (nodes included) when the phase began,
	// the scenario's own pool included.
	ObjectsBefore  map[string]int `json:"objectsBefore,omitempty"`
	WritesPerClaim float64        `json:"writesPerObject"`
	// LoadAverage is the harness machine's load average when the scenario ended.
	LoadAverage string `json:"loadAverage,omitempty"`
	// Hold is set for hold scenarios.
	Hold *Hold `json:"hold,omitempty"`
	// Runtime is set for runtime scenarios, which create no claims and leave the fields above
	// about objects empty.
	Runtime *Runtime `json:"runtime,omitempty"`
	// E2B is set for e2b scenarios: Latency is then the creates' latency, Ready counts the creates
	// whose first command succeeded, and each sample's latency is its create's.
	E2B     *E2B     `json:"e2b,omitempty"`
	Samples []Sample `json:"samples"`
}

// Sample is one created object.
type Sample struct {
	Name string `json:"name"`
	// StartSeconds is when the create call began, relative to the scenario's first create.
	StartSeconds float64 `json:"startSeconds"`
	// LatencySeconds runs from just before the create call to the first Ready=True watch event;
	// it is meaningful only when Ready is true.
	LatencySeconds float64 `json:"latencySeconds"`
	Ready          bool    `json:"ready"`
	Error          string  `json:"error,omitempty"`
	// Warm says a pool member served the create (e2b scenarios only), so a run's warm share can
	// be taken over any part of it, such as after its first seconds.
	Warm bool `json:"warm,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown renders the report as a conditions list, a results table and, per scenario, the API
// writes by verb and resource.
func Markdown(r *Report) string {
	var b strings.Builder
	c := r.Conditions
	fmt.Fprintf(&b, "Measured %s; commit %s; %s; API server %s; %d nodes; objects present: %s; harness load average: %s.\n",
		c.Time.UTC().Format(time.RFC3339), orDash(c.GitCommit), c.GoVersion, orDash(c.ServerVersion), c.Nodes, objectsLine(c.Objects), orDash(c.LoadAverage))
	if c.Note != "" {
		fmt.Fprintf(&b, "Conditions: %s\n", c.Note)
	}
	header := false // runtime scenarios have a table of their own; a run of only those has no row here
	for _, s := range r.Scenarios {
		if s.Runtime != nil {
			continue
		}
		if !header {
			header = true
			b.WriteString("\n| scenario | created | Ready | p50 | p90 | p99 | max | all Ready | API writes per object |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %.1f |\n", s.Name, s.Count, s.Ready,
			latency(s.Latency.N, s.Latency.P50), latency(s.Latency.N, s.Latency.P90), latency(s.Latency.N, s.Latency.P99),
			latency(s.Latency.N, s.Latency.Max), latency(s.Ready, s.AllReadySeconds), s.WritesPerClaim)
	}
	b.WriteString(holdTable(r.Scenarios))
	b.WriteString(runtimeTable(r.Scenarios))
	b.WriteString(e2bTable(r.Scenarios))
	for _, s := range r.Scenarios {
		if s.Runtime != nil || (len(s.Writes) == 0 && len(s.ObjectsBefore) == 0) {
			continue
		}
		fmt.Fprintf(&b, "\n%s: objects present before: %s; load average after: %s; API writes (total %.0f):\n\n",
			s.Name, objectsLine(s.ObjectsBefore), orDash(s.LoadAverage), s.Writes.Total())
		for _, k := range s.Writes.Keys() {
			fmt.Fprintf(&b, "- %s: %.0f\n", k, s.Writes[k])
		}
		if len(s.Reads) > 0 {
			fmt.Fprintf(&b, "\nAPI reads (GET, LIST) from the first create to the last Ready (total %.0f):\n\n", s.Reads.Total())
			for _, k := range s.Reads.Keys() {
				fmt.Fprintf(&b, "- %s: %.0f\n", k, s.Reads[k])
			}
		}
	}
	return b.String()
}

// latency formats seconds as milliseconds below 10 s, seconds above; "–" when nothing was measured.
func latency(n int, seconds float64) string {
	switch {
	case n == 0:
		return "–"
	case seconds < 10:
		return fmt.Sprintf("%.0f ms", seconds*1000)
	default:
		return fmt.Sprintf("%.1f s", seconds)
	}
}

func objectsLine(objects map[string]int) string {
	if len(objects) == 0 {
		return "none counted"
	}
	keys := make([]string, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", objects[k], k))
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// holdTable renders the hold scenarios' controller footprint and restart times.
func holdTable(results []Result) string {
	var b strings.Builder
	for _, s := range results {
		h := s.Hold
		if h == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| hold scenario | RSS settled | RSS after resync | CPU while creating | CPU idle | new process started | new Pod Ready | probe Ready | full resync |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		}
		resync := "not within the timeout"
		if h.ResyncComplete {
			resync = latency(1, h.ResyncSeconds)
		}
		started := "–"
		if h.ProcessStartedSeconds != 0 {
			started = latency(1, h.ProcessStartedSeconds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f cores | %.2f cores | %s | %s | %s | %s |\n", s.Name,
			mebibytes(h.Settled.RSSBytes), mebibytes(h.AfterResync.RSSBytes), h.CPUCoresCreating, h.CPUCoresIdle,
			started, latency(1, h.PodReadySeconds), latency(1, h.ProbeReadySeconds), resync)
	}
	for _, s := range results {
		if s.Hold != nil && len(s.Hold.Problems) > 0 {
			fmt.Fprintf(&b, "\n%s could not measure everything: %s.\n", s.Name, strings.Join(s.Hold.Problems, "; "))
		}
	}
	if b.Len() > 0 {
		b.WriteString("\nTimes after the restart run from the delete of the controller's Pod (the process start is on the controller's clock); a new Pod's readiness includes its readiness probe's period; a full resync is when the new process has queued at least as many items as Sandboxes are held and has nothing queued or in flight (workqueue metrics).\n")
	}
	return b.String()
}

// mebibytes formats bytes as MiB; "–" for nothing measured.
func mebibytes(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", v/(1<<20))
}
