package wake

import (
	"context"
	"errors"
	"net/http"

	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/resolve"
)

// ReasonTimeout is the failure reason of a wake that did not serve within the wake timeout.
const ReasonTimeout = "wake_timeout"

// retryAfter is the Retry-After of a wake that timed out: the resume goes on without the request.
const retryAfter = "5"

// Words tell a front door's clients why a wake failed, in that front door's terms (the router
// names a Sandbox and its namespace, the E2B front door a sandbox ID).
type Words struct {
	// NotWakeable: the Sandbox is suspended and traffic does not resume it.
	NotWakeable string
	// ClientGone: the client went away while the Sandbox was waking.
	ClientGone string
	// TimedOut: the Sandbox did not serve within the wake timeout.
	TimedOut string
}

// Hold wakes the Sandbox t names for a request that proved it may reach it, and answers its
// endpoint or the refusal every front door gives: suspended (with words.NotWakeable) when traffic
// does not wake it, the resolver's own error, or 503 ReasonTimeout.
func (w *Waker) Hold(ctx context.Context, t headers.Target, suspended *resolve.Error, words Words) (resolve.Endpoint, *resolve.Error) {
	ep, err := w.Wake(ctx, t)
	var rerr *resolve.Error
	switch {
	case err == nil:
		return ep, nil
	case errors.Is(err, ErrNotWakeable):
		suspended.Detail = words.NotWakeable
		return resolve.Endpoint{}, suspended
	case errors.As(err, &rerr):
		return resolve.Endpoint{}, rerr
	case ctx.Err() != nil:
		return resolve.Endpoint{}, &resolve.Error{Status: http.StatusServiceUnavailable, Reason: ReasonTimeout, Detail: words.ClientGone}
	}
	return resolve.Endpoint{}, &resolve.Error{Status: http.StatusServiceUnavailable, Reason: ReasonTimeout, Detail: words.TimedOut}
}

// SetRetryAfter asks the client to retry a wake that timed out in a few seconds.
func SetRetryAfter(h http.Header, rerr *resolve.Error) {
	if rerr.Reason == ReasonTimeout {
		h.Set("Retry-After", retryAfter)
	}
}
