package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// percentilesFile is the plot of p50, p90 and p99 by claim rate.
const percentilesFile = "percentiles.svg"

// WriteFiles writes report.json, report.md, one latency plot per scenario (scenario-1.svg, ...)
// and, when there are warm scenarios, percentiles.svg into dir, creating it if needed, and returns the paths it wrote.
func WriteFiles(dir string, r *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory %s: %w", dir, err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		return nil, err
	}
	files := map[string]string{"report.json": js.String()}
	md := Markdown(r)
	for i, s := range r.Scenarios {
		name := fmt.Sprintf("scenario-%d.svg", i+1)
		files[name] = SVG(s.Name, s.Samples)
		md += fmt.Sprintf("\n![%s](%s)\n", strings.ReplaceAll(s.Name, "]", ")"), name)
	}
	if doc, ok := PercentilesSVG("latency percentiles by claim rate", r.Scenarios); ok {
		files[percentilesFile] = doc
		md += fmt.Sprintf("\n![latency percentiles by claim rate](%s)\n", percentilesFile)
	}
	files["report.md"] = md
	var written []string
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}
