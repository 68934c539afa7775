package interpreter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chartOf runs code (which ends with plt.show()) and returns the one figure result it displays.
func chartOf(t *testing.T, url, code string) line {
	t.Helper()
	lines := execute(t, url, map[string]any{"code": "import matplotlib.pyplot as plt\n" + code})
	if e := errorOf(lines); e != nil {
		t.Fatalf("error: %v", e)
	}
	results := ofType(lines, lineResult)
	if len(results) != 1 {
		t.Fatalf("%d results, want the figure alone: %v", len(results), lines)
	}
	return results[0]
}

// asJSON round-trips v so it compares with decoded lines.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChartLine(t *testing.T) {
	_, url := newServer(t)
	r := chartOf(t, url, "plt.plot([1, 2, 3], [4, 5, 6], label='up')\nplt.plot([1, 2], [0, 1])\nplt.title('T')\nplt.xlabel('time (s)')\nplt.ylabel('v [m]')\nplt.show()")
	if r["text"] != "<Figure size 640x480 with 1 Axes>" || r["is_main_result"] != false {
		t.Errorf("figure result %v", r["text"])
	}
	img, err := png.Decode(base64.NewDecoder(base64.StdEncoding, bytes.NewReader([]byte(r["png"].(string)))))
	if err != nil {
		t.Fatalf("png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("png is %dx%d, want a 640x480 figure cropped to its content", b.Dx(), b.Dy())
	}
	c := r["chart"].(map[string]any)
	want := map[string]any{"type": "line", "title": "T", "x_label": "time (s)", "x_unit": "s", "y_label": "v [m]", "y_unit": "m",
		"x_scale": "linear", "y_scale": "linear",
		"elements": []any{
			map[string]any{"label": "up", "points": []any{[]any{1.0, 4.0}, []any{2.0, 5.0}, []any{3.0, 6.0}}},
			map[string]any{"label": "Line 1", "points": []any{[]any{1.0, 0.0}, []any{2.0, 1.0}}},
		}}
	for _, k := range []string{"x_ticks", "y_ticks", "x_tick_labels", "y_tick_labels"} {
		if _, ok := c[k].([]any); !ok {
			t.Errorf("%s missing: %v", k, c[k])
		}
		delete(c, k)
	}
	if d := cmp.Diff(asJSON(t, want), any(c)); d != "" {
		t.Errorf("line chart (-want +got):\n%s", d)
	}
}

func TestChartBarPieScatterBox(t *testing.T) {
	_, url := newServer(t)
	bar := chartOf(t, url, "plt.bar(['a', 'b'], [3, 5], label='g')\nplt.show()")["chart"].(map[string]any)
	if d := cmp.Diff(asJSON(t, []any{
		map[string]any{"label": "a", "group": "g", "value": 3},
		map[string]any{"label": "b", "group": "g", "value": 5},
	}), bar["elements"]); d != "" || bar["type"] != "bar" {
		t.Errorf("bar chart %v (-want +got):\n%s", bar["type"], d)
	}

	pie := chartOf(t, url, "plt.pie([1, 3], labels=['x', 'y'])\nplt.title('P')\nplt.show()")["chart"].(map[string]any)
	if d := cmp.Diff(asJSON(t, map[string]any{"type": "pie", "title": "P", "elements": []any{
		map[string]any{"label": "x", "angle": 90, "radius": 1},
		map[string]any{"label": "y", "angle": 270, "radius": 1},
	}}), any(pie)); d != "" {
		t.Errorf("pie chart (-want +got):\n%s", d)
	}

	scatter := chartOf(t, url, "plt.scatter([1, 2], [3, 4], label='pts')\nplt.grid(True)\nplt.show()")["chart"].(map[string]any)
	if d := cmp.Diff(asJSON(t, []any{map[string]any{"label": "pts", "points": []any{[]any{1, 3}, []any{2, 4}}}}), scatter["elements"]); d != "" || scatter["type"] != "scatter" {
		t.Errorf("scatter chart %v (-want +got):\n%s", scatter["type"], d)
	}

	box := chartOf(t, url, "plt.boxplot([[1, 2, 3, 4, 5, 20]], labels=['s'], patch_artist=True)\nplt.show()")["chart"].(map[string]any)
	if d := cmp.Diff(asJSON(t, []any{map[string]any{"label": "s", "min": 1, "first_quartile": 2.25, "median": 3.5,
		"third_quartile": 4.75, "max": 5, "outliers": []any{20}}}), box["elements"]); d != "" || box["type"] != "box_and_whisker" {
		t.Errorf("box chart %v (-want +got):\n%s", box["type"], d)
	}

	super := chartOf(t, url, "fig, (a, b) = plt.subplots(1, 2)\na.plot([1, 2])\nb.bar(['q'], [1])\nfig.suptitle('S')\nplt.show()")["chart"].(map[string]any)
	if super["type"] != "superchart" || super["title"] != "S" || len(super["elements"].([]any)) != 2 {
		t.Errorf("superchart %v", super)
	}
}

// TestFigureWithoutShow displays the figures a cell leaves open, after its main result.
func TestFigureWithoutShow(t *testing.T) {
	_, url := newServer(t)
	lines := execute(t, url, map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n7"})
	results := ofType(lines, lineResult)
	if len(results) != 2 || results[0]["text"] != "7" || results[1]["png"] == nil {
		t.Fatalf("results %v", results)
	}
	if lines := execute(t, url, map[string]any{"code": "8"}); len(ofType(lines, lineResult)) != 1 {
		t.Errorf("the figure is shown again in the next cell: %v", lines)
	}
}

func TestDataFrame(t *testing.T) {
	_, url := newServer(t)
	lines := execute(t, url, map[string]any{"code": "import pandas as pd, numpy as np\npd.DataFrame({'a': [1, 2], 'b': [0.5, np.nan], 'when': pd.to_datetime(['2024-01-01', '2024-01-02'])})"})
	results := ofType(lines, lineResult)
	if len(results) != 1 {
		t.Fatalf("results %v", lines)
	}
	r := results[0]
	if html, _ := r["html"].(string); !bytes.Contains([]byte(html), []byte("<table")) {
		t.Errorf("html %q", html)
	}
	if text, _ := r["text"].(string); !bytes.Contains([]byte(text), []byte("when")) {
		t.Errorf("text %q", text)
	}
	if d := cmp.Diff(asJSON(t, map[string]any{"a": []any{1, 2}, "b": []any{0.5, nil}, "when": []any{"2024-01-01T00:00:00", "2024-01-02T00:00:00"}}), r["data"]); d != "" {
		t.Errorf("data (-want +got):\n%s", d)
	}
}
