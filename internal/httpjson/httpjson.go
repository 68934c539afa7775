// Package httpjson writes JSON answers for Paddock's HTTP servers: the router (its proxy and its
// E2B front door) and sandboxd (its REST and E2B ports). Each protocol keeps its own error body;
// only the writing is shared.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers status with v encoded as JSON. An encoding or write failure is dropped: the
// status is sent already, and the client sees a short body.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
