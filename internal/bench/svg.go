package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Plot geometry, in SVG user units.
const (
	plotWidth   = 720.0
	plotHeight  = 360.0
	plotLeft    = 70.0
	plotRight   = 20.0
	plotTop     = 30.0
	plotBottom  = 50.0
	plotTickNum = 5
)

// SVG plots a scenario's latency over time: one circle per Ready sample at (create start,
// latency), with axes in seconds and milliseconds. It is a pure function so it can be tested as
// XML; the output has no external references.
func SVG(title string, samples []Sample) string {
	var ready []Sample
	for _, s := range samples {
		if s.Ready {
			ready = append(ready, s)
		}
	}
	maxX, maxY := 0.0, 0.0
	for _, s := range ready {
		maxX = math.Max(maxX, s.StartSeconds)
		maxY = math.Max(maxY, s.LatencySeconds)
	}
	maxX, maxY = niceCeil(maxX), niceCeil(maxY)
	innerW, innerH := plotWidth-plotLeft-plotRight, plotHeight-plotTop-plotBottom
	x := func(v float64) float64 { return plotLeft + v/maxX*innerW }
	y := func(v float64) float64 { return plotTop + innerH - v/maxY*innerH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">%s</text>`+"\n", plotLeft, html.EscapeString(title))
	fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fH%.1f" stroke="black" fill="none"/>`+"\n", plotLeft, plotTop, plotTop+innerH, plotLeft+innerW)
	for i := 0; i <= plotTickNum; i++ {
		vx, vy := maxX*float64(i)/plotTickNum, maxY*float64(i)/plotTickNum
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(vx), plotTop+innerH+16, trimFloat(vx))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, y(vy)+4, trimFloat(vy*1000))
		fmt.Fprintf(&b, `<path d="M%.1f %.1fH%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(vy), plotLeft+innerW)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">create started (s)</text>`+"\n", plotLeft+innerW/2, plotHeight-12)
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">latency to Ready (ms)</text>`+"\n", plotTop+innerH/2)
	b.WriteString(`<g fill="steelblue" fill-opacity="0.7">` + "\n")
	for _, s := range ready {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3"><title>%s %s</title></circle>`+"\n",
			x(s.StartSeconds), y(s.LatencySeconds), html.EscapeString(s.Name), latency(1, s.LatencySeconds))
	}
	b.WriteString("</g>\n</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so ticks fall on round numbers. Zero
// (no samples, or all at t=0) becomes 1 to keep the scale finite.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
