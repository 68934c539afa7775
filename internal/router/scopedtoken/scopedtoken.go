// Package scopedtoken mints and verifies tokens that grant access to exactly one sandbox.
//
// The wire format is the one upstream agent-sandbox routers accept, so tokens minted by either
// side work on both: "v1.<payload>.<signature>", both parts base64url without padding, payload
// the JSON {"ns":…,"name":…,"exp":<unix seconds>}, signature HMAC-SHA256 over a fixed domain
// prefix plus the encoded payload. The package is pure: the caller supplies keys and the clock.
package scopedtoken

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinKeyLen is the shortest key accepted, in bytes.
const MinKeyLen = 32

const (
	version = "v1"
	// signingDomain separates these signatures from any other use of the same key.
	signingDomain = "agent-sandbox/scoped-token/v1."
)

// Claims is what a token grants: one sandbox until Expiry.
type Claims struct {
	Namespace string `json:"ns"`
	Name      string `json:"name"`
	// Expiry is in Unix seconds; the token is invalid from that second on.
	Expiry int64 `json:"exp"`
}

// Errors returned by Verify. Every one of them means "not authenticated".
var (
	ErrMalformed = errors.New("scoped token is malformed")
	ErrSignature = errors.New("scoped token signature does not match any key")
	ErrExpired   = errors.New("scoped token has expired")
)

// Keys holds the signing key (the first) and every key still accepted for verification, so a key
// can be rotated by adding the new one first and removing the old one after the longest TTL.
type Keys struct{ keys [][]byte }

// ParseKeys reads one key per line from a key file; blank lines and lines starting with '#' are
// skipped. It fails when there is no key or a key is shorter than MinKeyLen.
func ParseKeys(data []byte) (Keys, error) {
	var ks Keys
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		k := strings.TrimSpace(sc.Text())
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		if len(k) < MinKeyLen {
			return Keys{}, fmt.Errorf("scoped-token key on line %d is %d bytes; use at least %d random bytes (for example `head -c 48 /dev/urandom | base64`)", line, len(k), MinKeyLen)
		}
		ks.keys = append(ks.keys, []byte(k))
	}
	if err := sc.Err(); err != nil {
		return Keys{}, fmt.Errorf("reading scoped-token keys: %w", err)
	}
	if len(ks.keys) == 0 {
		return Keys{}, fmt.Errorf("scoped-token key file holds no key; put one key of at least %d bytes per line", MinKeyLen)
	}
	return ks, nil
}

// Mint returns a token for namespace/name valid for ttl (at least one second, truncated to whole
// seconds) from now, signed with the first key.
func (ks Keys) Mint(namespace, name string, ttl time.Duration, now time.Time) (string, error) {
	if len(ks.keys) == 0 {
		return "", errors.New("no scoped-token key to sign with")
	}
	if namespace == "" || name == "" {
		return "", fmt.Errorf("scoped token needs a namespace and a name, got %q/%q", namespace, name)
	}
	if ttl < time.Second {
		return "", fmt.Errorf("scoped token ttl %s is below the minimum of 1s", ttl)
	}
	payload, err := json.Marshal(Claims{Namespace: namespace, Name: name, Expiry: now.Add(ttl.Truncate(time.Second)).Unix()})
	if err != nil {
		return "", fmt.Errorf("encoding scoped token claims: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(payload)
	sig := sign(ks.keys[0], body)
	return version + "." + body + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Verify checks the token's format, signature (against every key, in constant time) and expiry,
// and returns its claims.
func (ks Keys) Verify(token string, now time.Time) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != version {
		return Claims{}, ErrMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return Claims{}, ErrMalformed
	}
	if !ks.signedByAny(parts[1], sig) {
		return Claims{}, ErrSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Namespace == "" || c.Name == "" {
		return Claims{}, ErrMalformed
	}
	if now.Unix() >= c.Expiry {
		return Claims{}, ErrExpired
	}
	return c, nil
}

func (ks Keys) signedByAny(body string, sig []byte) bool {
	ok := false
	for _, k := range ks.keys {
		// No early exit, so timing does not reveal which key matched.
		ok = hmac.Equal(sign(k, body), sig) || ok
	}
	return ok
}

func sign(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signingDomain + body))
	return m.Sum(nil)
}
