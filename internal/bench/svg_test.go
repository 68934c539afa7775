package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// svgPoint is a data point read back from a plot: its tooltip and its position converted back
// to data values through the plot geometry.
type svgPoint struct {
	Title string
	X, Y  float64
}

// svgShape is what the SVG tests check: the root element, the texts by class and every point
// that carries a tooltip (legend markers carry none).
type svgShape struct {
	Root   string
	Texts  map[string][]string
	Points []svgPoint
}

// parseSVG fails the test unless doc is well-formed XML, and reads back its shape.
func parseSVG(t *testing.T, doc string) svgShape {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	shape := svgShape{Texts: map[string][]string{}}
	var inText string
	var circle *svgPoint
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return shape
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if shape.Root == "" {
				shape.Root = el.Name.Space + " " + el.Name.Local
			}
			switch el.Name.Local {
			case "circle":
				circle = &svgPoint{X: attrFloat(t, el, "cx"), Y: attrFloat(t, el, "cy")}
			case "text":
				inText = attr(el, "class")
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "circle":
				if circle.Title != "" {
					shape.Points = append(shape.Points, *circle)
				}
				circle = nil
			case "text":
				inText = ""
			}
		case xml.CharData:
			switch {
			case circle != nil && strings.TrimSpace(string(el)) != "":
				circle.Title = string(el)
			case inText != "":
				shape.Texts[inText] = append(shape.Texts[inText], string(el))
			}
		}
	}
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func attrFloat(t *testing.T, el xml.StartElement, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(attr(el, name), 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", el.Name.Local, name, attr(el, name), err)
	}
	return v
}

// toData converts SVG coordinates back to data values on axes from 0 to maxX and 0 to maxY.
func toData(p svgPoint, maxX, maxY float64) svgPoint {
	return svgPoint{
		Title: p.Title,
		X:     (p.X - plotLeft) / innerWidth * maxX,
		Y:     (plotTop + innerHeight - p.Y) / innerHeight * maxY,
	}
}

// near compares coordinates to the precision the SVG is written with.
var near = cmpopts.EquateApprox(0, 0.02)

func TestSVG(t *testing.T) {
	samples := []Sample{
		{Name: "a", StartSeconds: 0, LatencySeconds: 0.01, Ready: true},
		{Name: "b", StartSeconds: 0.05, LatencySeconds: 0.3, Ready: true},
		{Name: "c", StartSeconds: 0.1, Ready: false},
		{Name: "d<&>", StartSeconds: 2.5, LatencySeconds: 12, Ready: true},
	}
	got := parseSVG(t, SVG("warm <20/s> & more", samples))
	if diff := cmp.Diff("http://www.w3.org/2000/svg svg", got.Root); diff != "" {
		t.Errorf("root (-want +got):\n%s", diff)
	}
	// Axes: x up to 5 s (2.5 rounded up), y up to 20 s (12 s rounded up), in ms.
	wantTexts := map[string][]string{
		"xlabel": {"create started (s)"},
		"ylabel": {"latency to Ready (ms)"},
		"xtick":  {"0", "1", "2", "3", "4", "5"},
		"ytick":  {"0", "4000", "8000", "12000", "16000", "20000"},
	}
	for class, want := range wantTexts {
		if diff := cmp.Diff(want, got.Texts[class]); diff != "" {
			t.Errorf("%s texts (-want +got):\n%s", class, diff)
		}
	}
	// One point per Ready sample, at (start, latency); latency in seconds here.
	wantPoints := []svgPoint{{"a 10 ms", 0, 0.01}, {"b 300 ms", 0.05, 0.3}, {"d<&> 12.0 s", 2.5, 12}}
	var gotPoints []svgPoint
	for _, p := range got.Points {
		gotPoints = append(gotPoints, toData(p, 5, 20))
	}
	if diff := cmp.Diff(wantPoints, gotPoints, near); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
}

func TestSVGWithoutSamples(t *testing.T) {
	got := parseSVG(t, SVG("empty", nil))
	if len(got.Points) != 0 || len(got.Texts["xtick"]) == 0 {
		t.Errorf("empty plot: %d points, x ticks %v; want no points and a drawn axis", len(got.Points), got.Texts["xtick"])
	}
}

func TestPercentilesSVG(t *testing.T) {
	results := []Result{
		{Kind: KindWarm, Rate: 20, Count: 300, Latency: Summary{N: 300, P50: 0.1, P90: 0.2, P99: 0.4}},
		{Kind: KindCold, Count: 500, Latency: Summary{N: 500, P50: 9, P90: 9, P99: 9}}, // not a rate: left out
		{Kind: KindWarm, Rate: 50, Count: 300},                                         // nothing Ready: left out
		{Kind: KindWarm, Rate: 0, Count: 300, Latency: Summary{N: 300, P50: 1.5, P90: 3, P99: 4.5}},
	}
	doc, ok := PercentilesSVG("by rate", results)
	if !ok {
		t.Fatal("PercentilesSVG reported nothing to plot")
	}
	got := parseSVG(t, doc)
	wantTexts := map[string][]string{
		"xtick":  {"20/s", "burst of 300"},
		"xlabel": {"claim rate (warm scenarios)"},
		"ylabel": {"latency to Ready (ms)"},
		"ytick":  {"0", "1000", "2000", "3000", "4000", "5000"},
		"legend": {"p50", "p90", "p99"},
	}
	for class, want := range wantTexts {
		if diff := cmp.Diff(want, got.Texts[class]); diff != "" {
			t.Errorf("%s texts (-want +got):\n%s", class, diff)
		}
	}
	// Two categories at x=1 and x=2 on an axis to 3; y up to 5 s.
	want := []svgPoint{
		{"20/s p50: 100 ms", 1, 0.1}, {"burst of 300 p50: 1500 ms", 2, 1.5},
		{"20/s p90: 200 ms", 1, 0.2}, {"burst of 300 p90: 3000 ms", 2, 3},
		{"20/s p99: 400 ms", 1, 0.4}, {"burst of 300 p99: 4500 ms", 2, 4.5},
	}
	var points []svgPoint
	for _, p := range got.Points {
		points = append(points, toData(p, 3, 5))
	}
	if diff := cmp.Diff(want, points, near); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
}

func TestPercentilesSVGNothingToPlot(t *testing.T) {
	if doc, ok := PercentilesSVG("x", []Result{{Kind: KindCold, Latency: Summary{N: 1}}}); ok || doc != "" {
		t.Errorf("PercentilesSVG of cold results = %q, %v; want nothing", doc, ok)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, -1: 1, 0.03: 0.05, 0.1: 0.1, 0.11: 0.2, 3: 5, 7: 10, 12: 20} {
		if got := niceCeil(in); math.Abs(got-want) > 1e-12 {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
