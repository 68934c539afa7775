package authz

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/paddock-dev/paddock/internal/portforward"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// PortForward admits a request that carries no Authorization header and reached the router
// through the API server's port-forward: the API server authenticated its caller and authorized
// create on pods/portforward of the router's Pod before the runtime dialed the router on
// loopback (docs/design/credentials.md). Every other request, and every request that carries a
// credential, is Next's to decide. The address policy and token injection apply as to any request.
type PortForward struct {
	Next       Authorizer
	Recognizer portforward.Recognizer
}

// Authorize implements Authorizer.
func (p *PortForward) Authorize(ctx context.Context, r *http.Request, t headers.Target) error {
	if r.Header.Get("Authorization") != "" {
		return p.Next.Authorize(ctx, r, t)
	}
	peer := p.Recognizer.FromRequest(r)
	if peer.PortForward {
		return nil
	}
	err := p.Next.Authorize(ctx, r, t)
	if peer.Local && errors.Is(err, ErrUnauthenticated) {
		// Say why a local client (a sidecar, a user namespace) did not pass as the port-forward.
		err = fmt.Errorf("%w; a local connection is served without a token only when it comes from the API server's port-forward, and this one does not: %s", err, peer.Reason)
	}
	return err
}
