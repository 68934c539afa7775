package e2b

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// maxTimeoutSeconds bounds a sandbox's lifetime from now; E2B's own cap is 24 hours for paid
// teams, and a bound keeps the time arithmetic far from overflow.
const maxTimeoutSeconds = 7 * 24 * 3600

// timeoutOf returns the lifetime a request asks for, or the default, or an error naming the field.
func timeoutOf(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return DefaultTimeoutSeconds * time.Second, nil
	}
	if *seconds < 0 || *seconds > maxTimeoutSeconds {
		return 0, fmt.Errorf("timeout %d is out of range; give seconds between 0 and %d", *seconds, maxTimeoutSeconds)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// newClaim builds the SandboxClaim for an E2B create: named by the sandbox ID, from pool, with the
// metadata and template ID in annotations, envVars as env (served warm through claim settings when
// the pool's template opts in), and the timeout as an expiry that deletes the claim.
// With autoPause the timeout is the claim's idle timeout instead, and the claim never expires.
func newClaim(namespace, id, pool, templateID string, req *CreateRequest, lifetime time.Duration, life lifecycleOptions, now time.Time) (*extensionsv1beta1.SandboxClaim, error) {
	c := &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: id, Namespace: namespace,
			Labels:      map[string]string{SandboxLabel: "true"},
			Annotations: map[string]string{TemplateAnnotation: templateID},
		},
		Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: pool}},
	}
	if life.autoPause {
		maps.Copy(c.Annotations, life.idlePolicy(lifetime).Annotations())
	} else {
		c.Spec.Lifecycle = expiry(now, lifetime)
	}
	if len(req.Metadata) > 0 {
		b, err := json.Marshal(req.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encoding metadata: %w", err)
		}
		c.Annotations[MetadataAnnotation] = string(b)
	}
	names := make([]string, 0, len(req.EnvVars))
	for k := range req.EnvVars {
		if k == "" {
			return nil, fmt.Errorf("envVars: a variable has an empty name")
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c.Spec.Env = append(c.Spec.Env, extensionsv1beta1.EnvVar{Name: k, Value: req.EnvVars[k]})
	}
	return c, nil
}

func expiry(now time.Time, lifetime time.Duration) *extensionsv1beta1.Lifecycle {
	at := metav1.NewTime(now.Add(lifetime).Truncate(time.Second))
	return &extensionsv1beta1.Lifecycle{ShutdownTime: &at, ShutdownPolicy: extensionsv1beta1.ShutdownPolicyDelete}
}

// metadataOf decodes the metadata annotation; a claim edited by hand into invalid JSON has none.
func metadataOf(c *extensionsv1beta1.SandboxClaim) map[string]string {
	raw := c.Annotations[MetadataAnnotation]
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
		return StatePaused
	}
	return StateRunning
}

// templateOf is the template ID the claim was created from, or its pool's name.
func templateOf(c *extensionsv1beta1.SandboxClaim) string {
	if t := c.Annotations[TemplateAnnotation]; t != "" {
		return t
	}
	return c.Spec.WarmPoolRef.Name
}

// detailOf renders GET /sandboxes/{id}. sb may be nil while the claim is unbound.
func detailOf(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) SandboxDetail {
	d := SandboxDetail{
		SandboxID: c.Name, TemplateID: templateOf(c), ClientID: clientID, EnvdVersion: EnvdVersion,
		StartedAt: c.CreationTimestamp.UTC().Format(time.RFC3339), Metadata: metadataOf(c), State: stateOf(sb),
		CPUCount: 1, MemoryMB: 512, Lifecycle: lifecycleDetailOf(c),
	}
	switch l := c.Spec.Lifecycle; {
	case l != nil && l.ShutdownTime != nil:
		d.EndAt = l.ShutdownTime.UTC().Format(time.RFC3339)
	case pausesOnTimeout(c) && d.State == StateRunning:
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

// clientID is E2B's deprecated, required clientID field.
const clientID = "paddock"

// listFilter is a parsed list query.
type listFilter struct {
	metadata map[string]string
	states   []string
	limit    int
	after    string
}

// List bounds, as E2B's API has them.
const (
	defaultListLimit = 100
	maxListLimit     = 100
)

// parseListQuery reads metadata (one URL-encoded "k=v&k2=v2" string), state ("running,paused"),
// limit and nextToken. v1 lists only running sandboxes unless state says otherwise.
func parseListQuery(q url.Values, v1 bool) (listFilter, error) {
	f := listFilter{limit: defaultListLimit}
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
			case StateRunning, StatePaused:
				f.states = append(f.states, s)
			case "":
			default:
				return f, fmt.Errorf("state %q is not running or paused", s)
			}
		}
	}
	if len(f.states) == 0 && v1 {
		f.states = []string{StateRunning}
	}
	if raw := q.Get("limit"); raw != "" {
		var n int
		if _, err := fmt.Sscanf(raw, "%d", &n); err != nil || n < 1 || n > maxListLimit {
			return f, fmt.Errorf("limit %q must be a number from 1 to %d", raw, maxListLimit)
		}
		f.limit = n
	}
	if raw := q.Get("nextToken"); raw != "" {
		if !IsID(raw) {
			return f, fmt.Errorf("nextToken %q was not issued by this server; start the list again without it", raw)
		}
		f.after = raw
	}
	return f, nil
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

// page orders details by sandbox ID, keeps those after the cursor and returns at most limit of
// them with the cursor of the next page ("" on the last page). The ID order is stable under
// concurrent creates and deletes: a page never repeats an item, and an item that exists for the
// whole listing is returned once.
func page(all []SandboxDetail, f listFilter) ([]SandboxDetail, string) {
	sort.Slice(all, func(i, j int) bool { return all[i].SandboxID < all[j].SandboxID })
	start := sort.Search(len(all), func(i int) bool { return all[i].SandboxID > f.after })
	out := all[start:]
	if len(out) > f.limit {
		return out[:f.limit], out[f.limit-1].SandboxID
	}
	return out, ""
}
