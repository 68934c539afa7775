package authz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// SandboxAccess is the access a SubjectAccessReview asks for: verb "create" on the "proxy"
// subresource of the named Sandbox, by analogy with pods/proxy and pods/exec. Grant it with a
// Role rule {apiGroups: [agents.x-k8s.io], resources: [sandboxes/proxy], verbs: [create]}.
var SandboxAccess = authorizationv1.ResourceAttributes{
	Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes", Subresource: "proxy", Verb: "create",
}

// apiCallTimeout bounds one TokenReview or SubjectAccessReview call.
const apiCallTimeout = 3 * time.Second

// TokenReview authenticates Bearer tokens with the Kubernetes TokenReview API, refusing requests
// without one, and, unless SkipAccessCheck is set, authorizes each sandbox with a
// SubjectAccessReview. Results, positive and
// negative, are cached by a hash of the token for TTL; API failures for a third of it.
type TokenReview struct {
	client      kubernetes.Interface
	audiences   []string
	checkAccess bool
	ttl         time.Duration
	cache       *cache.LRUExpireCache
}

// TokenReviewOptions configures NewTokenReview.
type TokenReviewOptions struct {
	Audiences []string
	// SkipAccessCheck drops the SubjectAccessReview for SandboxAccess on the named sandbox, so
	// any authenticated identity reaches every sandbox. The zero value checks.
	SkipAccessCheck bool
	TTL             time.Duration
	CacheSize       int
}

// NewTokenReview returns a TokenReview authorizer using client.
func NewTokenReview(client kubernetes.Interface, o TokenReviewOptions) *TokenReview {
	return &TokenReview{client: client, audiences: o.Audiences, checkAccess: !o.SkipAccessCheck, ttl: o.TTL, cache: cache.NewLRUExpireCache(o.CacheSize)}
}

type decision struct {
	err  error
	user authenticationv1.UserInfo
}

// Authorize implements Authorizer.
func (a *TokenReview) Authorize(ctx context.Context, r *http.Request, t headers.Target) error {
	token := BearerToken(r)
	if token == "" {
		// Unlike upstream, a mode named for authentication never lets an anonymous request by.
		return fmt.Errorf("%w: send a Kubernetes token as \"Authorization: Bearer <token>\" (for example from `kubectl create token`)", ErrUnauthenticated)
	}
	// The reviews outlive the request: a client that half-closes its connection after sending
	// (nc, some proxies) cancels the request's context at once, which would turn its answer into
	// a 500. Each call is bounded by apiCallTimeout, and its answer is cached for the next.
	ctx = context.WithoutCancel(ctx)
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	authn := a.cached(ctx, "authn/"+key, func() decision { return a.review(ctx, token) })
	if authn.err != nil || !a.checkAccess {
		return authn.err
	}
	return a.cached(ctx, "authz/"+key+"/"+t.Namespace+"/"+t.Name, func() decision {
		return decision{err: a.access(ctx, authn.user, t)}
	}).err
}

func (a *TokenReview) cached(ctx context.Context, key string, compute func() decision) decision {
	if v, ok := a.cache.Get(key); ok {
		return v.(decision)
	}
	d := compute()
	if ctx.Err() != nil {
		// The client went away mid-call; its failure says nothing about the token.
		return d
	}
	ttl := a.ttl
	if d.err != nil && StatusFor(d.err) == http.StatusInternalServerError {
		ttl = max(a.ttl/3, time.Second)
	}
	a.cache.Add(key, d, ttl)
	return d
}

func (a *TokenReview) review(ctx context.Context, token string) decision {
	ctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
	defer cancel()
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
	}, metav1.CreateOptions{})
	switch {
	case err != nil:
		return decision{err: fmt.Errorf("TokenReview failed (the router needs create on tokenreviews.authentication.k8s.io): %w", err)}
	case !tr.Status.Authenticated:
		reason := tr.Status.Error
		if reason == "" {
			reason = "the API server did not accept the token"
		}
		return decision{err: fmt.Errorf("%w: %s", ErrUnauthenticated, reason)}
	}
	return decision{user: tr.Status.User}
}

func (a *TokenReview) access(ctx context.Context, user authenticationv1.UserInfo, t headers.Target) error {
	ctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
	defer cancel()
	attrs := SandboxAccess
	attrs.Namespace, attrs.Name = t.Namespace, t.Name
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &attrs, User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		},
	}, metav1.CreateOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("SubjectAccessReview failed (the router needs create on subjectaccessreviews.authorization.k8s.io): %w", err)
	case !sar.Status.Allowed:
		return fmt.Errorf("%w: %q may not create sandboxes/proxy on sandbox %s/%s; grant it with a Role", ErrForbidden,
			user.Username, t.Namespace, t.Name)
	}
	return nil
}
