package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// requestsMetric is the API server's counter of handled requests.
const requestsMetric = "apiserver_request_total"

// writeVerbs are the request verbs that change state. The API server reports a server-side apply
// PATCH as APPLY and a collection DELETE as DELETECOLLECTION; both are HTTP PATCH and DELETE
// requests, so they count too.
var writeVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "DELETECOLLECTION": true,
}

// readVerbs are the request verbs that read state once; WATCH is left out, as a watch is one
// long request whatever it delivers.
var readVerbs = map[string]bool{"GET": true, "LIST": true}

// ignoredResources are written by every component all the time (leader election, events) and
// say nothing about the work a claim costs.
var ignoredResources = map[string]bool{"leases": true, "events": true}

// Writes counts requests by "VERB resource[.group][/subresource]": write requests, or for
// ParseReads read requests.
type Writes map[string]float64

// Total is the sum over all keys.
func (w Writes) Total() float64 {
	var sum float64
	for _, v := range w {
		sum += v
	}
	return sum
}

// Sub returns w - before per key, leaving out keys that did not change. Counters that went down
// (an API server restart) yield the after value, as Prometheus' increase() would.
func (w Writes) Sub(before Writes) Writes {
	out := Writes{}
	for k, v := range w {
		d := v - before[k]
		if d < 0 {
			d = v
		}
		if d != 0 {
			out[k] = d
		}
	}
	return out
}

// Keys returns the keys in order, for stable rendering.
func (w Writes) Keys() []string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ParseWrites reads the API server's /metrics text and sums apiserver_request_total over response
// codes and other labels for each write verb and resource, leaving out leases and events.
func ParseWrites(r io.Reader) (Writes, error) { return parseRequests(r, writeVerbs, ignoredResources) }

// ParseWritesWithEvents is ParseWrites counting events too (leases are still left out): what a
// test that attributes every write of one operation counts.
func ParseWritesWithEvents(r io.Reader) (Writes, error) {
	return parseRequests(r, writeVerbs, map[string]bool{"leases": true})
}

// ParseReads is ParseWrites for the GET and LIST requests.
func ParseReads(r io.Reader) (Writes, error) { return parseRequests(r, readVerbs, ignoredResources) }

func parseRequests(r io.Reader, verbs, ignored map[string]bool) (Writes, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing API server metrics (is this the output of GET /metrics?): %w", err)
	}
	family, ok := families[requestsMetric]
	if !ok {
		return nil, fmt.Errorf("API server metrics have no %s; the identity in the kubeconfig may lack access to /metrics", requestsMetric)
	}
	out := Writes{}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !verbs[labels["verb"]] || ignored[labels["resource"]] {
			continue
		}
		out[writeKey(labels)] += m.GetCounter().GetValue()
	}
	return out, nil
}

func writeKey(labels map[string]string) string {
	var b strings.Builder
	b.WriteString(labels["verb"])
	b.WriteString(" ")
	b.WriteString(labels["resource"])
	if g := labels["group"]; g != "" {
		b.WriteString(".")
		b.WriteString(g)
	}
	if s := labels["subresource"]; s != "" {
		b.WriteString("/")
		b.WriteString(s)
	}
	return b.String()
}
