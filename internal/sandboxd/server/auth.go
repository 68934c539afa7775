package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/portforward"
)

// AccessTokenHeader is the header E2B clients carry the sandbox token in; sandboxd accepts it on
// every HTTP listener besides Authorization: Bearer.
const AccessTokenHeader = e2b.AccessTokenHeader

// AuthError is why a call was refused: Status is 401 (no or wrong credential) or 403 (a valid
// credential that may not do this, such as the sandbox token on a locked warm member).
type AuthError struct {
	Status  int
	Message string
}

func (e *AuthError) Error() string { return e.Message }

// GRPCStatus makes status.FromError see Unauthenticated or PermissionDenied.
func (e *AuthError) GRPCStatus() *status.Status {
	if e.Status == http.StatusForbidden {
		return status.New(codes.PermissionDenied, e.Message)
	}
	return status.New(codes.Unauthenticated, e.Message)
}

var (
	errNoCredential = &AuthError{Status: http.StatusUnauthorized,
		Message: "missing or wrong sandbox token; send Authorization: Bearer <token> (gRPC metadata authorization, or X-Access-Token) with the token from Secret <sandbox>-credentials"}
	errNotClaimed = &AuthError{Status: http.StatusForbidden,
		Message: "the sandbox is not claimed yet: this warm-pool member answers only the controller until a SandboxClaim adopts it"}
	errNoControlToken = &AuthError{Status: http.StatusForbidden,
		Message: "claim settings are disabled: sandboxd has no control token; set " + sandboxd.ControlTokenEnv + " (the controller does for every Sandbox)"}
	errWrongControlToken = &AuthError{Status: http.StatusUnauthorized,
		Message: "missing or wrong control token; only the controller may send claim settings (Authorization: Bearer <control token>)"}
)

func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// credentials are the tokens a request presents: the Authorization bearer and X-Access-Token.
func credentials(r *http.Request) []string {
	var out []string
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		out = append(out, tok)
	}
	if tok := r.Header.Get(AccessTokenHeader); tok != "" {
		out = append(out, tok)
	}
	return out
}

// AuthorizeCredentials decides an ordinary API call (exec, files, metadata) from the tokens the
// caller presented. The control token always passes; while the daemon is locked (an unclaimed warm
// member) nothing else does; otherwise the sandbox token passes, and any call when sandboxd runs
// with --allow-unauthenticated. It returns nil or an *AuthError.
func (d *Daemon) AuthorizeCredentials(creds ...string) error {
	for _, c := range creds {
		if tokenEqual(c, d.cfg.ControlToken) {
			return nil
		}
	}
	if d.locked.Load() {
		return errNotClaimed
	}
	if d.cfg.Token == "" && d.cfg.AllowUnauthenticated {
		return nil
	}
	for _, c := range creds {
		if tokenEqual(c, d.cfg.Token) {
			return nil
		}
	}
	return errNoCredential
}

// Authorize decides an ordinary API call from r's Authorization: Bearer or X-Access-Token
// header, for every listener that serves sandboxd's processes and files (see
// AuthorizeCredentials); a call without one may be admitted by its peer (authorizePeer).
func (d *Daemon) Authorize(r *http.Request) error {
	return d.authorizePeer(credentials(r), func() portforward.Peer { return d.peers.FromRequest(r) })
}

// authorizePeer decides a call that presents creds. A call that presents none is admitted as
// if it carried the sandbox token when its peer is the API server's port-forward
// (AcceptPortForward) or, with AllowUnauthenticatedNetwork, comes over the network: never past
// the warm-member lock, and never for control calls, which AuthorizeControl decides alone. Code in
// the sandbox is a local peer that is not root, so it gets nothing this way (see
// docs/design/credentials.md).
func (d *Daemon) authorizePeer(creds []string, peer func() portforward.Peer) error {
	if len(creds) > 0 || (!d.cfg.AcceptPortForward && !d.cfg.AllowUnauthenticatedNetwork) {
		return d.AuthorizeCredentials(creds...)
	}
	p := peer()
	if (d.cfg.AcceptPortForward && p.PortForward) || (d.cfg.AllowUnauthenticatedNetwork && p.Remote) {
		if d.locked.Load() {
			return errNotClaimed
		}
		return nil
	}
	err := d.AuthorizeCredentials()
	if p.Local && d.cfg.AcceptPortForward && errors.Is(err, errNoCredential) {
		return &AuthError{Status: http.StatusUnauthorized, Message: errNoCredential.Message +
			"; a call from inside the Pod is served without a token only when it comes from the API server's port-forward, and this one does not: " + p.Reason}
	}
	return err
}

// AuthorizeControl decides a call only the controller may make (claim settings): r must carry
// the control token; the sandbox token is not enough.
func (d *Daemon) AuthorizeControl(r *http.Request) error {
	if d.cfg.ControlToken == "" {
		return errNoControlToken
	}
	for _, c := range credentials(r) {
		if tokenEqual(c, d.cfg.ControlToken) {
			return nil
		}
	}
	return errWrongControlToken
}

// writeAuthError answers a refused HTTP call.
func writeAuthError(w http.ResponseWriter, err error) {
	var ae *AuthError
	if !errors.As(err, &ae) {
		ae = &AuthError{Status: http.StatusUnauthorized, Message: err.Error()}
	}
	code := codeUnauthenticated
	if ae.Status == http.StatusForbidden {
		code = codePermissionDenied
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
	}
	writeError(w, ae.Status, code, ae.Message)
}

// requireToken wraps h so that every request but the open paths (health, for kubelet probes)
// passes Authorize. The claim-settings paths check the control token themselves.
func (d *Daemon) requireToken(h http.Handler, open ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range append(open, sandboxd.ClaimSettingsPath) {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		if err := d.Authorize(r); err != nil {
			writeAuthError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// controlAuthorized checks the control token and writes the error when it fails.
func (d *Daemon) controlAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if err := d.AuthorizeControl(r); err != nil {
		writeAuthError(w, err)
		return false
	}
	return true
}

// grpcAuth returns interceptors that authorize every call from the "authorization" metadata.
func (d *Daemon) grpcAuth() []grpc.ServerOption {
	check := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		var creds []string
		for _, v := range md.Get("authorization") {
			if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
				creds = append(creds, tok)
			}
		}
		return d.authorizePeer(creds, func() portforward.Peer {
			p, ok := peer.FromContext(ctx)
			if !ok {
				return portforward.Peer{Reason: "the call carries no peer address"}
			}
			return d.peers.Check(p.LocalAddr, p.Addr)
		})
	}
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			defer d.activity.begin()()
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			defer d.activity.begin()()
			return h(srv, ss)
		}),
	}
}
