package idle

import (
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/activity"
)

// Decision is what one pass does with a Sandbox whose recorded activity has run out.
type Decision struct {
	// Suspend is true when the Sandbox has been idle for the whole timeout.
	Suspend bool
	// Record, when not zero, is the newer last activity to write to paddock.dev/last-activity.
	Record time.Time
	// After is when to look again, when not suspending.
	After time.Duration
}

// RouterLag is how far paddock.dev/last-activity can trail the router's latest request to a
// Sandbox: the router flushes what it saw once per activity.RecordInterval and writes only
// activity that moved by at least that much.
const RouterLag = 2 * activity.RecordInterval

// Decide judges a Sandbox from the last activity recorded on it and, when its daemon answered,
// the daemon's own account (nil: no daemon, or not asked). A busy daemon is active now. Without
// a daemon's account the annotation is the only witness and may trail traffic by RouterLag, so a
// shorter timeout acts as RouterLag: it would otherwise suspend a sandbox in use.
func Decide(p activity.Policy, now, recorded time.Time, daemon *sandboxd.Activity) Decision {
	if daemon == nil && p.Timeout < RouterLag {
		p.Timeout = RouterLag
	}
	last := recorded
	if daemon != nil {
		switch {
		case daemon.Busy():
			last = now
		case daemon.LastActivity.After(last):
			last = daemon.LastActivity
		}
	}
	deadline := last.Add(p.Timeout)
	if !now.Before(deadline) {
		return Decision{Suspend: true}
	}
	d := Decision{After: deadline.Sub(now)}
	if last.Sub(recorded) >= activity.RecordInterval {
		d.Record = last
	}
	return d
}
