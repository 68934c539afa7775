package e2b

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// idLength is the length of a sandbox ID: 20 characters of [a-z2-7] carry 100 random bits, and
// "49983-" plus the ID stays far below a DNS label's 63 bytes.
const idLength = 20

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a fresh sandbox ID: lowercase letters and digits, DNS-label safe, no '-'.
func NewID() (string, error) {
	b := make([]byte, 13)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a sandbox ID: %w", err)
	}
	return idEncoding.EncodeToString(b)[:idLength], nil
}

// NewAPIKey returns a fresh API key: APIKeyPrefix and 192 random bits in hex.
func NewAPIKey() (string, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating an API key: %w", err)
	}
	return APIKeyPrefix + hex.EncodeToString(raw), nil
}

// IsID reports whether s has the shape of a sandbox ID as E2B defines it: ^[a-z0-9]+$, at most 57
// characters. IDs the front door did not make may pass; they then match no claim.
func IsID(s string) bool {
	if s == "" || len(s) > 57 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// DataTarget is the sandbox and port a data-plane request is for.
type DataTarget struct {
	ID   string
	Port int
}

// TargetFromHeaders reads the E2b-Sandbox-Id and E2b-Sandbox-Port headers (E2B_SANDBOX_URL mode).
// ok is false when the request carries no E2b-Sandbox-Id; err is set when it carries a bad one.
func TargetFromHeaders(id, port string) (t DataTarget, ok bool, err error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return DataTarget{}, false, nil
	}
	if !IsID(id) {
		return DataTarget{}, true, fmt.Errorf("header %s: %q is not a sandbox ID (lowercase letters and digits)", SandboxIDHeader, id)
	}
	t = DataTarget{ID: id, Port: EnvdPort}
	if port = strings.TrimSpace(port); port != "" {
		p, perr := strconv.Atoi(port)
		if perr != nil || p < 1 || p > 65535 {
			return DataTarget{}, true, fmt.Errorf("header %s: %q is not a port number", SandboxPortHeader, port)
		}
		t.Port = p
	}
	return t, true, nil
}

// TargetFromHost reads a Host of the form {port}-{id}.{domain}, as the SDK builds it without
// E2B_SANDBOX_URL and for getHost(port). ok is false for any other Host.
func TargetFromHost(host, domain string) (DataTarget, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, rest, found := strings.Cut(host, ".")
	if !found || domain == "" || rest != strings.ToLower(domain) {
		return DataTarget{}, false
	}
	portText, id, found := strings.Cut(label, "-")
	if !found || !IsID(id) {
		return DataTarget{}, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portText {
		return DataTarget{}, false
	}
	return DataTarget{ID: id, Port: port}, true
}
