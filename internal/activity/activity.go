// Package activity is what the idle controller, the router and the front doors share about
// idleness: the spelling of paddock.dev/last-activity (its format and how far it must move before
// it is written) and the idle policy annotations (Policy). It imports no controller machinery, so
// the router and tools link it without the controller's.
package activity

import "time"

// RecordInterval is the least newer activity must move paddock.dev/last-activity before anyone
// writes it: at most one write per Sandbox per minute of activity, none while idle.
const RecordInterval = time.Minute

// Format renders a time as paddock.dev/last-activity holds it (RFC 3339, whole seconds, UTC).
func Format(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// Parse reads a paddock.dev/last-activity value; false when it is absent or malformed.
func Parse(v string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}
