package server

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// bearerMatches compares "Bearer <token>" in constant time.
func bearerMatches(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// requireToken wraps h so that, when a token is configured, every request but the open paths
// (health, for kubelet probes) must carry it. The claim-settings paths check their own token.
func (d *Daemon) requireToken(h http.Handler, open ...string) http.Handler {
	if d.cfg.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range append(open, "/v1/claim-settings") {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		if !bearerMatches(r.Header.Get("Authorization"), d.cfg.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
			writeError(w, http.StatusUnauthorized, codeUnauthenticated,
				"missing or wrong bearer token; send the header Authorization: Bearer <token> with sandboxd's --token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// claimAuthorized checks the claim-settings token and writes the error when it fails.
func (d *Daemon) claimAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if d.cfg.ClaimToken == "" {
		writeError(w, http.StatusForbidden, codePermissionDenied,
			"claim settings are disabled; start sandboxd with --claim-token-file to enable them")
		return false
	}
	if !bearerMatches(r.Header.Get("Authorization"), d.cfg.ClaimToken) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd-claim"`)
		writeError(w, http.StatusUnauthorized, codeUnauthenticated,
			"missing or wrong claim token; send Authorization: Bearer <claim token>")
		return false
	}
	return true
}

// grpcAuth returns interceptors that require the token in the "authorization" metadata.
func (d *Daemon) grpcAuth() []grpc.ServerOption {
	if d.cfg.Token == "" {
		return nil
	}
	check := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			if bearerMatches(v, d.cfg.Token) {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "missing or wrong bearer token; send metadata authorization: Bearer <token> with sandboxd's --token")
	}
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}
