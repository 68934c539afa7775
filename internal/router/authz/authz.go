// Package authz decides whether a request may reach the sandbox it names. Three modes exist:
// AllowAll for development, TokenReview (Kubernetes identities, optionally with a
// SubjectAccessReview per sandbox) and Scoped (HMAC tokens bound to one sandbox).
package authz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/scopedtoken"
)

// Sentinel errors; wrap them with the reason and what to do.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Authorizer allows or denies a request for the sandbox in t. A nil error allows.
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request, t headers.Target) error
}

// StatusFor maps an authorization error to its HTTP status: 401, 403, or 500 for anything else
// (the authorizer itself failed, for example the API server was unreachable).
func StatusFor(err error) int {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header (scheme
// case-insensitive), or "" when there is none.
func BearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// AllowAll allows every request. For development only.
type AllowAll struct{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, *http.Request, headers.Target) error { return nil }

// Scoped accepts tokens minted by scopedtoken for exactly the sandbox a request names.
type Scoped struct {
	Keys scopedtoken.Keys
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Authorize implements Authorizer.
func (s *Scoped) Authorize(_ context.Context, r *http.Request, t headers.Target) error {
	token := BearerToken(r)
	if token == "" {
		return fmt.Errorf("%w: send a scoped token as \"Authorization: Bearer <token>\"", ErrUnauthenticated)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	claims, err := s.Keys.Verify(token, now())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if claims.Namespace != t.Namespace || claims.Name != t.Name {
		return fmt.Errorf("%w: the token is scoped to sandbox %s/%s, not %s/%s", ErrForbidden,
			claims.Namespace, claims.Name, t.Namespace, t.Name)
	}
	return nil
}
