// Package naming holds the pure functions that derive names and label values from object names.
package naming

import (
	"fmt"
	"hash/fnv"
)

// NameHash returns the 32-bit FNV-1a hash of s as exactly eight lower-case hex digits. Every
// "*-hash" label value of the agent-sandbox API is computed with it, so the values must match
// other implementations bit for bit.
func NameHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s)) // hash.Hash never returns an error.
	return fmt.Sprintf("%08x", h.Sum32())
}
