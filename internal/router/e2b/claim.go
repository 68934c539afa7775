package e2b

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// How a front-door claim and its Sandbox look in E2B's terms (get and list), and the list query.
// Pure: no client, no I/O.

// metadataOf decodes the metadata annotation; a claim edited by hand into invalid JSON has none.
func metadataOf(c *extensionsv1beta1.SandboxClaim) map[string]string {
	raw := c.Annotations[e2bapi.MetadataAnnotation]
	if raw == "" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m
}

// stateOf is paused when the bound Sandbox is asked to be Suspended, running otherwise.
func stateOf(sb *agentsv1beta1.Sandbox) string {
	if sb != nil && sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		return e2bapi.StatePaused
	}
	return e2bapi.StateRunning
}

// detailOf renders GET /sandboxes/{id}. sb may be nil while the claim is unbound.
func detailOf(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) e2bapi.SandboxDetail {
	d := e2bapi.SandboxDetail{
		SandboxID: c.Name, TemplateID: templateOf(c), ClientID: e2bapi.ClientID, EnvdVersion: e2bapi.EnvdVersion,
		StartedAt: c.CreationTimestamp.UTC().Format(time.RFC3339), Metadata: metadataOf(c), State: stateOf(sb),
		CPUCount: 1, MemoryMB: 512, Lifecycle: lifecycleDetailOf(c),
	}
	d.Network, d.AllowInternetAccess = networkOf(c)
	switch l := c.Spec.Lifecycle; {
	case l != nil && l.ShutdownTime != nil:
		d.EndAt = l.ShutdownTime.UTC().Format(time.RFC3339)
	case pausesOnTimeout(c) && d.State == e2bapi.StateRunning:
		d.EndAt = pauseAt(c, sb).UTC().Format(time.RFC3339)
	default:
		// A paused sandbox has no expiry; E2B still requires endAt, so it reports the start.
		d.EndAt = d.StartedAt
	}
	if sb != nil && len(sb.Spec.PodTemplate.Spec.Containers) > 0 {
		res := sb.Spec.PodTemplate.Spec.Containers[0].Resources
		if q, ok := quantity(res, corev1.ResourceCPU); ok {
			d.CPUCount = int64(math.Max(1, math.Ceil(q.AsApproximateFloat64())))
		}
		if q, ok := quantity(res, corev1.ResourceMemory); ok {
			d.MemoryMB = q.Value() >> 20
		}
	}
	return d
}

func quantity(res corev1.ResourceRequirements, name corev1.ResourceName) (interface {
	AsApproximateFloat64() float64
	Value() int64
}, bool) {
	if q, ok := res.Limits[name]; ok {
		return &q, true
	}
	if q, ok := res.Requests[name]; ok {
		return &q, true
	}
	return nil, false
}

// listFilter is a parsed list query.
type listFilter struct {
	metadata map[string]string
	states   []string
	pageBounds
}

// pageBounds are a list's limit and the cursor it starts after ("" for the first page).
type pageBounds struct {
	limit int
	after string
}

// List bounds, as E2B's API has them.
const (
	defaultListLimit = 100
	maxListLimit     = 100
)

// parseListQuery reads metadata (one URL-encoded "k=v&k2=v2" string), state ("running,paused"),
// limit and nextToken. v1 lists only running sandboxes unless state says otherwise.
func parseListQuery(q url.Values, v1 bool) (listFilter, error) {
	var f listFilter
	if raw := q.Get("metadata"); raw != "" {
		vals, err := url.ParseQuery(raw)
		if err != nil {
			return f, fmt.Errorf("metadata %q is not a URL-encoded k=v&k2=v2 string: %v", raw, err)
		}
		f.metadata = map[string]string{}
		for k, v := range vals {
			f.metadata[k] = v[0]
		}
	}
	for _, raw := range q["state"] {
		for _, s := range strings.Split(raw, ",") {
			switch s = strings.TrimSpace(s); s {
			case e2bapi.StateRunning, e2bapi.StatePaused:
				f.states = append(f.states, s)
			case "":
			default:
				return f, fmt.Errorf("state %q is not running or paused", s)
			}
		}
	}
	if len(f.states) == 0 && v1 {
		f.states = []string{e2bapi.StateRunning}
	}
	var err error
	f.pageBounds, err = parsePageBounds(q, e2bapi.IsID)
	return f, err
}

// parsePageBounds reads limit and nextToken; a nextToken that validToken refuses was not issued
// by this server.
func parsePageBounds(q url.Values, validToken func(string) bool) (pageBounds, error) {
	b := pageBounds{limit: defaultListLimit}
	if raw := q.Get("limit"); raw != "" {
		var n int
		if _, err := fmt.Sscanf(raw, "%d", &n); err != nil || n < 1 || n > maxListLimit {
			return b, fmt.Errorf("limit %q must be a number from 1 to %d", raw, maxListLimit)
		}
		b.limit = n
	}
	if raw := q.Get("nextToken"); raw != "" {
		if !validToken(raw) {
			return b, fmt.Errorf("nextToken %q was not issued by this server; start the list again without it", raw)
		}
		b.after = raw
	}
	return b, nil
}

// matches reports whether a sandbox passes the filter's metadata and state.
func (f listFilter) matches(metadata map[string]string, state string) bool {
	for k, v := range f.metadata {
		if got, ok := metadata[k]; !ok || got != v {
			return false
		}
	}
	return len(f.states) == 0 || slices.Contains(f.states, state)
}

// page orders items by their ID (key), keeps those after the cursor and returns at most limit of
// them with the cursor of the next page ("" on the last page). The ID order is stable under
// concurrent creates and deletes: a page never repeats an item, and an item that exists for the
// whole listing is returned once.
func page[T any](all []T, key func(T) string, b pageBounds) ([]T, string) {
	sort.Slice(all, func(i, j int) bool { return key(all[i]) < key(all[j]) })
	start := sort.Search(len(all), func(i int) bool { return key(all[i]) > b.after })
	out := all[start:]
	if len(out) > b.limit {
		return out[:b.limit], key(out[b.limit-1])
	}
	return out, ""
}
