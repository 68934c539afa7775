package idle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/activity"
)

func TestDecide(t *testing.T) {
	p := activity.Policy{Timeout: 10 * time.Minute}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name   string
		daemon *sandboxd.Activity
		want   Decision
	}{
		{name: "no daemon, timeout passed", want: Decision{Suspend: true}},
		{name: "daemon idle since before the record", daemon: &sandboxd.Activity{LastActivity: t0.Add(-time.Hour)}, want: Decision{Suspend: true}},
		{name: "daemon saw a call 30s after the record: no write", daemon: &sandboxd.Activity{LastActivity: t0.Add(30 * time.Second)},
			want: Decision{After: 30 * time.Second}},
		{name: "daemon saw a call 4m ago: written", daemon: &sandboxd.Activity{LastActivity: t0.Add(6 * time.Minute)},
			want: Decision{Record: t0.Add(6 * time.Minute), After: 6 * time.Minute}},
		{name: "a quiet running process keeps it awake", daemon: &sandboxd.Activity{LastActivity: t0.Add(-time.Hour), Processes: 1},
			want: Decision{Record: now, After: 10 * time.Minute}},
		{name: "an open stream keeps it awake", daemon: &sandboxd.Activity{LastActivity: t0, Streams: 1},
			want: Decision{Record: now, After: 10 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(p, now, t0, tc.daemon)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideShortTimeoutWithoutDaemon: the router reports a sandbox's traffic up to RouterLag
// late, so with no daemon to ask a timeout shorter than that must not suspend a sandbox whose
// last recorded activity is younger than RouterLag; a daemon's own account is exact.
func TestDecideShortTimeoutWithoutDaemon(t *testing.T) {
	p := activity.Policy{Timeout: 30 * time.Second}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		since  time.Duration
		daemon *sandboxd.Activity
		want   Decision
	}{
		{name: "no daemon, timeout passed, report may still be on its way", since: 90 * time.Second, want: Decision{After: RouterLag - 90*time.Second}},
		{name: "no daemon, RouterLag passed", since: RouterLag, want: Decision{Suspend: true}},
		{name: "daemon idle for the timeout", since: 90 * time.Second, daemon: &sandboxd.Activity{LastActivity: t0}, want: Decision{Suspend: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(p, t0.Add(tc.since), t0, tc.daemon)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}
