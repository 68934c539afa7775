package proxy

import (
	"encoding/json"
	"net/http"
)

// WriteDetail answers with the router's JSON error shape, {"detail": "..."}.
func WriteDetail(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"detail": detail})
}
