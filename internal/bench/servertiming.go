package bench

import (
	"strconv"
	"strings"
	"time"
)

// serverSteps are the steps of one create as the front door's Server-Timing header names them
// (internal/router/e2b timing.go): claim, bound, daemon and probe durations; refused is the
// number of probes the daemon refused, from daemon's description ("2 refused").
type serverSteps map[string]time.Duration

// refusedStep is the key under which serverSteps keeps the refused probes, as a count.
const refusedStep = "refused"

// parseServerTiming reads Server-Timing values ("name;dur=12.5;desc=\"x\", ..."); entries without
// a duration in milliseconds are skipped, so an answer without the header gives no steps.
func parseServerTiming(values []string) serverSteps {
	steps := serverSteps{}
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			params := strings.Split(strings.TrimSpace(entry), ";")
			name := strings.TrimSpace(params[0])
			for _, p := range params[1:] {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				switch k {
				case "dur":
					if ms, err := strconv.ParseFloat(val, 64); err == nil && name != "" {
						steps[name] = time.Duration(ms * float64(time.Millisecond))
					}
				case "desc":
					if n, ok := strings.CutSuffix(strings.Trim(val, `"`), " refused"); ok && name == "daemon" {
						if count, err := strconv.Atoi(n); err == nil {
							steps[refusedStep] = time.Duration(count)
						}
					}
				}
			}
		}
	}
	return steps
}
