package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxResultBytes is the kubelet's limit on a termination message; a Result is encoded within it.
const MaxResultBytes = 4096

// Result is what a capture Pod writes to its termination message: the stored image on success,
// or the error; an image delete Pod writes the deleted image or the error. PausedMilliseconds is reported in both cases when the container was paused.
type Result struct {
	// Image is the stored image as a digest reference; empty on failure.
	Image string `json:"image,omitempty"`
	// SizeBytes is the size of the layer the capture added.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// PausedMilliseconds is how long the source container was frozen.
	PausedMilliseconds int64 `json:"pausedMilliseconds,omitempty"`
	// Error says what failed; empty on success.
	Error string `json:"error,omitempty"`
	// Refused is set by an image deletion the registry refused: trying again will not help.
	Refused bool `json:"refused,omitempty"`
}

// Encode renders r for a termination message, cutting Error so that the whole fits in
// MaxResultBytes.
func (r Result) Encode() []byte {
	for {
		b, err := json.Marshal(r)
		if err != nil || len(b) <= MaxResultBytes || r.Error == "" {
			return b
		}
		r.Error = r.Error[:len(r.Error)/2] + "…"
	}
}

// ParseResult reads a termination message. A message that is not a Result (the capture binary
// died before writing one) is an error quoting its start.
func ParseResult(msg string) (Result, error) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return Result{}, errors.New("the capture Pod wrote no result (killed before it finished?)")
	}
	var r Result
	dec := json.NewDecoder(strings.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("the capture Pod's result %q is not JSON: %w", truncate(msg, 200), err)
	}
	if r.Error == "" && !strings.Contains(r.Image, "@sha256:") {
		return Result{}, fmt.Errorf("the capture Pod's result names no image by digest (image %q)", truncate(r.Image, 200))
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
