package bench

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// percentilesFile is the plot of p50, p90 and p99 by claim rate.
const percentilesFile = "percentiles.svg"

// scenarioPlot names the latency-over-time plot of the i-th scenario (from 0).
func scenarioPlot(i int) string { return fmt.Sprintf("scenario-%d.svg", i+1) }

// plotted says whether a scenario gets a latency-over-time plot: a hold scenario's thousands of
// creations make a large file that shows nothing the cold scenario does not, and a runtime
// scenario creates one object.
func plotted(s Result) bool { return s.Kind != KindHold && s.Kind != KindRuntime }

// WriteFiles writes report.json, report.md, one latency plot per scenario (scenario-1.svg, ...)
// and, when there are warm scenarios, percentiles.svg into dir, creating it if needed, and
// returns the paths it wrote.
func WriteFiles(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory %s: %w", dir, err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		return nil, err
	}
	var written []string
	for name, content := range map[string]string{"report.json": js.String(), "report.md": DocSection(r, "")} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return written, fmt.Errorf("writing %s: %w", p, err)
		}
		written = append(written, p)
	}
	plots, err := writePlots(dir, r)
	return append(written, plots...), err
}

// writePlots writes the SVG plots of the report into dir.
func writePlots(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating plot directory %s: %w", dir, err)
	}
	files := map[string]string{}
	for i, s := range r.Scenarios {
		if plotted(s) {
			files[scenarioPlot(i)] = SVG(s.Name, s.Samples)
		}
	}
	if doc, ok := PercentilesSVG("latency percentiles by claim rate", r.Scenarios); ok {
		files[percentilesFile] = doc
	}
	var written []string
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return written, fmt.Errorf("writing %s: %w", p, err)
		}
		written = append(written, p)
	}
	return written, nil
}

// plotLink is the Markdown path of a plot in plotDir ("" for next to the document).
func plotLink(plotDir, name string) string {
	if plotDir == "" {
		return name
	}
	return path.Join(plotDir, name)
}
