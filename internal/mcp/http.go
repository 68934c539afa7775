package mcp

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPPath is where the streamable HTTP transport answers.
const HTTPPath = "/mcp"

// HTTPHandler serves the streamable HTTP transport at HTTPPath. Sessions idle for longer than
// idle end (and so delete their sandboxes). token, when set, is required as a bearer token.
func (s *Server) HTTPHandler(token string, idle time.Duration) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, Logger: s.cfg.ProtocolLogger})
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, h)
	if token == "" {
		return mux
	}
	return BearerAuth(token, mux)
}

// BearerAuth answers 401 to requests without "Authorization: Bearer <token>".
func BearerAuth(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock-mcp"`)
			http.Error(w, "paddock mcp: missing or wrong bearer token (send Authorization: Bearer <the --token-file token>)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
