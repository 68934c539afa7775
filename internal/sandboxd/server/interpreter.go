package server

import (
	"net/http"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/portforward"
)

// InterpreterHandler wraps the code interpreter's handler h with envd's credential model: every
// route but GET /health needs the sandbox token (or --envd-access-token) in X-Access-Token,
// Authorization: Bearer or E2B-Traffic-Access-Token, which @e2b/code-interpreter sends on every
// call when the sandbox has a traffic token (X-Access-Token only on /execute); a locked warm
// member refuses them all. Every authorized call is activity while it lasts.
func (d *Daemon) InterpreterHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			h.ServeHTTP(w, r)
			return
		}
		creds := credentials(r)
		if tok := r.Header.Get(e2b.TrafficAccessTokenHeader); tok != "" {
			creds = append(creds, tok)
		}
		if err := d.authorizePeer(d.e2bCredentials(creds), func() portforward.Peer { return d.peers.FromRequest(r) }); err != nil {
			writeAuthError(w, err)
			return
		}
		defer d.activity.begin()()
		h.ServeHTTP(w, r)
	})
}
