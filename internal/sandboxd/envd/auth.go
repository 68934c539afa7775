package envd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/paddock-dev/paddock/api/e2b"
)

// Users E2B clients may name. Every one of them runs as sandboxd's own uid with the same home:
// sandboxd does not switch users.
var knownUsers = map[string]bool{"": true, "user": true, "root": true}

// AccessTokenHeader carries the sandbox token on every envd request.
const AccessTokenHeader = e2b.AccessTokenHeader

// authorize wraps h: every request but GET /health must pass Authorize with the tokens it
// carries in X-Access-Token or Authorization: Bearer (which the router injects); a /files request
// may carry a valid signature instead.
func (s *Server) authorize(h http.Handler) http.Handler {
	rpcErrors := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			h.ServeHTTP(w, r)
			return
		}
		creds := presented(r)
		if r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
			if err := s.checkSignature(r); err != nil {
				writeError(w, http.StatusUnauthorized, err.Error())
				return
			}
			creds = append(creds, s.cfg.AccessToken)
		}
		if s.cfg.AwaitClaim != nil {
			s.cfg.AwaitClaim(r.Context(), creds)
		}
		err := s.cfg.Authorize(creds...)
		if err == nil {
			h.ServeHTTP(w, r)
			return
		}
		ce := connect.NewError(connect.CodeUnauthenticated, err)
		if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok && st.GRPCStatus().Code() == codes.PermissionDenied {
			ce = connect.NewError(connect.CodePermissionDenied, err)
		}
		if r.URL.Path != "/files" && rpcErrors.IsSupported(r) {
			_ = rpcErrors.Write(w, r, ce)
			return
		}
		writeError(w, httpStatus(ce), ce.Message())
	})
}

// presented are the tokens a request carries.
func presented(r *http.Request) []string {
	var out []string
	if got := r.Header.Get(AccessTokenHeader); got != "" {
		out = append(out, got)
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		out = append(out, got)
	}
	return out
}

// errNoToken is what tokenAuthorizer refuses with.
var errNoToken = errors.New("missing or wrong access token; send the sandbox token in the X-Access-Token header")

// tokenAuthorizer accepts calls presenting token (every call when token is empty).
func tokenAuthorizer(token string) func(creds ...string) error {
	return func(creds ...string) error {
		if token == "" {
			return nil
		}
		for _, c := range creds {
			if subtle.ConstantTimeCompare([]byte(c), []byte(token)) == 1 {
				return nil
			}
		}
		return errNoToken
	}
}

// Signature is the signed-URL parameter of /files for path, operation ("read" or "write"),
// user and token, expiring at the unix second expires (0: never): "v1_" and the unpadded
// standard base64 of sha256("path:operation:user:token[:expires]").
func Signature(path, operation, user, token string, expires int64) string {
	raw := path + ":" + operation + ":" + user + ":" + token
	if expires != 0 {
		raw += ":" + strconv.FormatInt(expires, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// checkSignature verifies the signature and signature_expiration query parameters of a /files
// request against the path, operation and user it names.
func (s *Server) checkSignature(r *http.Request) error {
	q := r.URL.Query()
	sig := q.Get("signature")
	if s.cfg.AccessToken == "" {
		return errors.New("this sandbox has no access token, so it issues no signed URLs; drop the signature parameters")
	}
	var expires int64
	if v := q.Get("signature_expiration"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("signature_expiration=%q must be a unix time in seconds", v)
		}
		if s.cfg.Now().After(time.Unix(n, 0)) {
			return errors.New("the signed URL has expired; ask for a new one")
		}
		expires = n
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	user, _ := requestUser(r)
	want := Signature(q.Get("path"), op, user, s.cfg.AccessToken, expires)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return errors.New("the signature does not match this path, operation and user")
	}
	return nil
}

// requestUser is the user a request names: the username query parameter, else the user of
// "Authorization: Basic base64(user:)"; ok is false for a user sandboxd does not know.
func requestUser(r *http.Request) (user string, ok bool) {
	user = r.URL.Query().Get("username")
	if user == "" {
		if u, _, basic := r.BasicAuth(); basic {
			user = u
		}
	}
	return user, knownUsers[user]
}

// checkUser returns the Connect error for a request naming an unknown user.
func checkUser(h http.Header) error {
	r := &http.Request{Header: h, URL: nil}
	if u, _, basic := r.BasicAuth(); basic && !knownUsers[u] {
		return connect.NewError(connect.CodeUnauthenticated, fmt.Errorf(
			"user %q does not exist in this sandbox; use \"user\" or \"root\" (both run as sandboxd's user)", u))
	}
	return nil
}
