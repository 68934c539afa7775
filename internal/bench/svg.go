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
	plotRight   = 110.0 // room for a legend
	plotTop     = 30.0
	plotBottom  = 50.0
	plotTickNum = 5
)

// chart is one plot area with linear axes from 0 to maxX and 0 to maxY. Its methods write SVG
// elements; nothing in it needs a library, so the output is plain text that tests parse as XML.
type chart struct {
	b          strings.Builder
	maxX, maxY float64
}

const (
	innerWidth  = plotWidth - plotLeft - plotRight
	innerHeight = plotHeight - plotTop - plotBottom
)

// newChart starts a document titled title, with the y axis in milliseconds up to maxYSeconds
// (rounded up to a round number) and the x axis up to maxX.
func newChart(title string, maxX, maxYSeconds float64) *chart {
	c := &chart{maxX: maxX, maxY: niceCeil(maxYSeconds)}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, plotHeight, plotWidth, plotHeight)
	c.b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&c.b, `<text x="%.0f" y="18" font-size="14">%s</text>`+"\n", plotLeft, html.EscapeString(title))
	fmt.Fprintf(&c.b, `<path class="axis" d="M%.1f %.1fV%.1fH%.1f" stroke="black" fill="none"/>`+"\n",
		plotLeft, plotTop, plotTop+innerHeight, plotLeft+innerWidth)
	for i := 0; i <= plotTickNum; i++ {
		v := c.maxY * float64(i) / plotTickNum
		fmt.Fprintf(&c.b, `<text class="ytick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, c.y(v)+4, trimFloat(v*1000))
		fmt.Fprintf(&c.b, `<path d="M%.1f %.1fH%.1f" stroke="#ddd"/>`+"\n", plotLeft, c.y(v), plotLeft+innerWidth)
	}
	return c
}

// x and y map data values to SVG coordinates; y is in seconds.
func (c *chart) x(v float64) float64 { return plotLeft + v/c.maxX*innerWidth }
func (c *chart) y(v float64) float64 { return plotTop + innerHeight - v/c.maxY*innerHeight }

// labels writes the axis titles.
func (c *chart) labels(xLabel, yLabel string) {
	fmt.Fprintf(&c.b, `<text class="xlabel" x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n",
		plotLeft+innerWidth/2, plotHeight-12, html.EscapeString(xLabel))
	fmt.Fprintf(&c.b, `<text class="ylabel" transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		plotTop+innerHeight/2, html.EscapeString(yLabel))
}

// xTick writes a label under the x axis at data value v.
func (c *chart) xTick(v float64, label string) {
	fmt.Fprintf(&c.b, `<text class="xtick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
		c.x(v), plotTop+innerHeight+16, html.EscapeString(label))
}

// point writes a circle at (x, ySeconds) with a tooltip.
func (c *chart) point(x, ySeconds float64, color, tooltip string) {
	fmt.Fprintf(&c.b, `<circle cx="%.2f" cy="%.2f" r="3" fill="%s"><title>%s</title></circle>`+"\n",
		c.x(x), c.y(ySeconds), color, html.EscapeString(tooltip))
}

// line joins the points (xs[i], ys[i]) in order.
func (c *chart) line(xs, ys []float64, color string) {
	var d strings.Builder
	for i := range xs {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.2f %.2f", cmd, c.x(xs[i]), c.y(ys[i]))
	}
	fmt.Fprintf(&c.b, `<path d="%s" stroke="%s" fill="none"/>`+"\n", d.String(), color)
}

// legend writes one entry per series in the right margin.
func (c *chart) legend(names, colors []string) {
	for i, name := range names {
		y := plotTop + 10 + float64(i)*18
		fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", plotLeft+innerWidth+16, y, colors[i])
		fmt.Fprintf(&c.b, `<text class="legend" x="%.1f" y="%.1f">%s</text>`+"\n", plotLeft+innerWidth+26, y+4, html.EscapeString(name))
	}
}

func (c *chart) String() string { return c.b.String() + "</svg>\n" }

// SVG plots a scenario's latency over time: one circle per Ready sample at (create start,
// latency), with axes in seconds and milliseconds. It is a pure function so it can be tested as
// XML; the output has no external references.
func SVG(title string, samples []Sample) string {
	var ready []Sample
	maxX, maxY := 0.0, 0.0
	for _, s := range samples {
		if s.Ready {
			ready = append(ready, s)
			maxX = math.Max(maxX, s.StartSeconds)
			maxY = math.Max(maxY, s.LatencySeconds)
		}
	}
	c := newChart(title, niceCeil(maxX), maxY)
	for i := 0; i <= plotTickNum; i++ {
		v := c.maxX * float64(i) / plotTickNum
		c.xTick(v, trimFloat(v))
	}
	c.labels("create started (s)", "latency to Ready (ms)")
	for _, s := range ready {
		c.point(s.StartSeconds, s.LatencySeconds, "steelblue", s.Name+" "+latency(1, s.LatencySeconds))
	}
	return c.String()
}

// percentileSeries are the lines of the percentiles plot, in legend order.
var percentileSeries = []struct {
	name, color string
	value       func(Summary) float64
}{
	{"p50", "steelblue", func(s Summary) float64 { return s.P50 }},
	{"p90", "darkorange", func(s Summary) float64 { return s.P90 }},
	{"p99", "firebrick", func(s Summary) float64 { return s.P99 }},
}

// PercentilesSVG plots p50, p90 and p99 of the warm scenarios by rate: one x position per
// scenario in the order given (the bursts labelled "burst"), one line per percentile. Scenarios
// without Ready samples and cold ones are left out. ok is false when nothing is left to plot.
func PercentilesSVG(title string, results []Result) (doc string, ok bool) {
	var warm []Result
	maxY := 0.0
	for _, r := range results {
		if r.Kind == KindWarm && r.Latency.N > 0 {
			warm = append(warm, r)
			maxY = math.Max(maxY, r.Latency.P99)
		}
	}
	if len(warm) == 0 {
		return "", false
	}
	// Categories sit at 1..n on an axis from 0 to n+1, so none touches the frame.
	c := newChart(title, float64(len(warm)+1), maxY)
	xs := make([]float64, len(warm))
	for i, r := range warm {
		xs[i] = float64(i + 1)
		c.xTick(xs[i], rateLabel(r))
	}
	c.labels("claim rate (warm scenarios)", "latency to Ready (ms)")
	names, colors := make([]string, 0, len(percentileSeries)), make([]string, 0, len(percentileSeries))
	for _, series := range percentileSeries {
		ys := make([]float64, len(warm))
		for i, r := range warm {
			ys[i] = series.value(r.Latency)
		}
		c.line(xs, ys, series.color)
		for i, r := range warm {
			c.point(xs[i], ys[i], series.color, fmt.Sprintf("%s %s: %s", rateLabel(r), series.name, latency(1, ys[i])))
		}
		names, colors = append(names, series.name), append(colors, series.color)
	}
	c.legend(names, colors)
	return c.String(), true
}

// rateLabel names a warm scenario's rate on an axis.
func rateLabel(r Result) string {
	if r.Rate == 0 {
		return fmt.Sprintf("burst of %d", r.Count)
	}
	return fmt.Sprintf("%g/s", r.Rate)
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
