package manager

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	routermetrics "github.com/paddock-dev/paddock/internal/router/metrics"
)

const dashboardFile = "../../config/grafana/paddock-dashboard.json"

// dashboard is the part of a Grafana dashboard the test reads: each panel's PromQL, and the
// template variables' queries.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardUsesRegisteredMetrics fails when a PromQL expression of the Grafana dashboard
// names a metric the controller does not register (a typo, or a metric renamed or removed).
func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	registered := registeredMetrics(t)
	used := 0
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricNames(target.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: found no metric in %q", p.Title, target.Expr)
			}
			for _, name := range names {
				used++
				if !registered[name] {
					t.Errorf("panel %q uses %s, which the controller does not register (expression %q)", p.Title, name, target.Expr)
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			expr, _ := q["query"].(string)
			inner := strings.TrimSuffix(strings.TrimPrefix(expr, "label_values("), ")")
			name, _, _ := strings.Cut(inner, ",")
			if name = strings.TrimSpace(name); !registered[name] {
				t.Errorf("variable %q queries %s, which the controller does not register", v.Name, name)
			}
		}
	}
	if used < 10 {
		t.Errorf("the dashboard uses %d metrics; the panels were not read", used)
	}
}

// registeredMetrics returns the name of every series the controller's /metrics can serve:
// controller-runtime's registry (workqueue, REST client, reconcile and leader-election metrics,
// Go and process collectors) and Paddock's own, with the _bucket, _sum and _count series of each.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	own := prometheus.NewRegistry()
	o := NewOptions()
	o.Extensions = true
	// No collector reads from the cache to describe itself, so no reader is needed.
	if err := RegisterMetrics(own, nil, o); err != nil {
		t.Fatal(err)
	}
	// The dashboard's scale-to-zero row also charts the router's wake metrics.
	router := prometheus.NewRegistry()
	routermetrics.New(router)
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{own, router, ctrlmetrics.Registry.(prometheus.Collector)} {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for desc := range ch {
			m := fqName.FindStringSubmatch(desc.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", desc)
			}
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

// promQLWords are the identifiers of PromQL that are not metric names.
var promQLWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	// aggregation operators, which may take their grouping before the parenthesis
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

// metricNames returns the metric names an expression selects. It is a small PromQL scanner, not
// a parser: it skips strings, label matchers {…}, ranges […], grouping label lists and function
// calls, and keeps the remaining identifiers.
func metricNames(expr string) []string {
	var names []string
	afterGrouping := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{' || c == '[' || (c == '(' && afterGrouping):
			i = skipGroup(expr, i, map[byte]byte{'{': '}', '[': ']', '(': ')'}[c])
			afterGrouping = false
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdentPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			i = j
			next := strings.TrimLeft(expr[j:], " \t\n")
			switch {
			case promQLWords[strings.ToLower(word)]:
				afterGrouping = word == "by" || word == "without" || word == "on" || word == "ignoring" ||
					word == "group_left" || word == "group_right"
			case strings.HasPrefix(next, "("):
				// a function or aggregation
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			if c != ' ' && c != '\t' && c != '\n' {
				afterGrouping = false
			}
			i++
			if c >= '0' && c <= '9' { // skip the rest of a number, e.g. 0.99 or 1e3
				for i < len(expr) && (isIdentPart(expr[i]) || expr[i] == '.') {
					i++
				}
			}
		}
	}
	return names
}

// skipString returns the index after the string literal that starts at i.
func skipString(expr string, i int) int {
	quote := expr[i]
	for i++; i < len(expr); i++ {
		switch expr[i] {
		case '\\':
			i++
		case quote:
			return i + 1
		}
	}
	return len(expr)
}

// skipGroup returns the index after closer, skipping string literals on the way.
func skipGroup(expr string, i int, closer byte) int {
	for i++; i < len(expr); {
		switch expr[i] {
		case '"', '\'', '`':
			i = skipString(expr, i)
		case closer:
			return i + 1
		default:
			i++
		}
	}
	return len(expr)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (le, controller) (rate(x_seconds_bucket{a="b,c", d=~"$ns"}[$__rate_interval])))`, []string{"x_seconds_bucket"}},
		{`sum by (ns) (a) / clamp_min(sum without (pod) (b{c="}"}), 1)`, []string{"a", "b"}},
		{`a and on (job) b offset 5m`, []string{"a", "b"}},
		{`max by(name) (leader_election_master_status) > bool 0.5e1`, []string{"leader_election_master_status"}},
		{`count by (v) (c) or vector(0)`, []string{"c"}},
	} {
		if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
			t.Errorf("metricNames(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}
