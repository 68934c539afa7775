package server

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// activity remembers, without locks or writes anywhere, what the idle controller asks about: when
// the daemon last served a call and how many calls are in flight.
type activity struct {
	last     atomic.Int64 // unix nanoseconds
	inflight atomic.Int64
}

func (a *activity) touch(now time.Time) { a.last.Store(now.UnixNano()) }

// begin counts a call in flight and returns the function that ends it; both ends are activity.
func (a *activity) begin() func() {
	a.touch(time.Now())
	a.inflight.Add(1)
	return func() {
		a.inflight.Add(-1)
		a.touch(time.Now())
	}
}

// Activity is what GET /v1/activity answers: calls, processes and streams, whichever is newest.
func (d *Daemon) Activity() sandboxd.Activity {
	running, ended := d.procs.Activity()
	last := time.Unix(0, d.activity.last.Load())
	if ended.After(last) {
		last = ended
	}
	return sandboxd.Activity{LastActivity: last.UTC(), Processes: int32(running), Streams: int32(d.activity.inflight.Load())}
}

// trackActivity counts every call h serves as activity, except the paths in quiet (health probes
// and the activity query itself, which would otherwise keep every sandbox awake).
func (d *Daemon) trackActivity(h http.Handler, quiet ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range quiet {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		defer d.activity.begin()()
		h.ServeHTTP(w, r)
	})
}

func (d *Daemon) getActivity(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, d.Activity())
}

func (d *Daemon) keepalive(w http.ResponseWriter, _ *http.Request) {
	d.activity.touch(time.Now())
	httpjson.Write(w, http.StatusOK, d.Activity())
}
