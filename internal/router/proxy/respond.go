package proxy

import (
	"net/http"

	"github.com/paddock-dev/paddock/internal/httpjson"
)

// WriteDetail answers with the router's JSON error shape, {"detail": "..."}.
func WriteDetail(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	httpjson.Write(w, status, map[string]string{"detail": detail})
}
