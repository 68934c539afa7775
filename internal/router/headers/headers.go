// Package headers parses and validates the routing headers of a router request. It is pure: no
// I/O, no logging. The header names, defaults, validation order and error texts are the wire
// contract that upstream agent-sandbox clients rely on, so they must not change.
package headers

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Header names in canonical form. They are case-insensitive on the wire.
const (
	SandboxID        = "X-Sandbox-Id"
	SandboxUID       = "X-Sandbox-Uid"
	SandboxNamespace = "X-Sandbox-Namespace"
	SandboxPort      = "X-Sandbox-Port"
	SandboxPodIP     = "X-Sandbox-Pod-Ip"
	SandboxTimeout   = "X-Sandbox-Timeout"
)

// Defaults applied when a header is absent.
const (
	DefaultNamespace = "default"
	DefaultPort      = 8888
)

// Error texts returned in the JSON "detail" field with status 400.
const (
	MsgIDRequired       = "X-Sandbox-ID header is required."
	MsgInvalidID        = "Invalid sandbox ID format."
	MsgInvalidNamespace = "Invalid namespace format."
	MsgInvalidPort      = "Invalid port format."
	MsgInvalidPodIP     = "Invalid target IP address."
	MsgInvalidTimeout   = "Invalid timeout format."
)

// Error is a header that failed validation; Detail is the client-facing text.
type Error struct{ Detail string }

func (e *Error) Error() string { return e.Detail }

// Target is a validated routing request.
type Target struct {
	// Name and Namespace identify the Sandbox.
	Name      string
	Namespace string
	// UID, when set, must match the Sandbox's UID.
	UID string
	// Port is the container port to reach.
	Port int
	// PodIP, when valid, is the address to dial instead of resolving the Sandbox.
	PodIP netip.Addr
	// Timeout is the client's requested per-request timeout; zero means none was sent.
	Timeout time.Duration
}

// Policy holds the knobs of validation that differ between production and tests.
type Policy struct {
	// AllowLoopback accepts loopback pod IPs. Only tests set it; no flag exposes it.
	AllowLoopback bool
}

// Parse validates the routing headers in the order of the wire contract and returns the first
// failure.
func Parse(h http.Header, p Policy) (Target, *Error) {
	var t Target
	t.Name = strings.TrimSpace(h.Get(SandboxID))
	if t.Name == "" {
		return Target{}, &Error{MsgIDRequired}
	}
	if !isDNSLabel(t.Name) {
		return Target{}, &Error{MsgInvalidID}
	}
	t.Namespace = DefaultNamespace
	if ns := strings.TrimSpace(h.Get(SandboxNamespace)); ns != "" {
		t.Namespace = ns
	}
	if !isDNSLabel(t.Namespace) {
		return Target{}, &Error{MsgInvalidNamespace}
	}
	t.Port = DefaultPort
	if raw := strings.TrimSpace(h.Get(SandboxPort)); raw != "" {
		port, err := strconv.Atoi(raw)
		if err != nil || port < 1 || port > 65535 {
			return Target{}, &Error{MsgInvalidPort}
		}
		t.Port = port
	}
	if raw := strings.TrimSpace(h.Get(SandboxPodIP)); raw != "" {
		ip, err := netip.ParseAddr(raw)
		if err != nil || ip.Zone() != "" || !Dialable(ip, p) {
			return Target{}, &Error{MsgInvalidPodIP}
		}
		t.PodIP = ip.Unmap()
	}
	t.UID = strings.TrimSpace(h.Get(SandboxUID))
	if raw := strings.TrimSpace(h.Get(SandboxTimeout)); raw != "" {
		d, ok := parseSeconds(raw)
		if !ok {
			return Target{}, &Error{MsgInvalidTimeout}
		}
		t.Timeout = d
	}
	return t, nil
}

// Dialable reports whether the router may connect to ip. It refuses the unspecified address,
// link-local unicast (this covers cloud metadata at 169.254.169.254), multicast, and loopback
// unless the policy allows it. Nothing else is special-cased: sandboxes live on private ranges.
func Dialable(ip netip.Addr, p Policy) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(),
		ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return false
	case ip.IsLoopback():
		return p.AllowLoopback
	}
	return true
}

func isDNSLabel(s string) bool {
	return len(validation.IsDNS1123Label(s)) == 0
}

// maxTimeoutSeconds bounds the client timeout so the conversion to a Duration cannot overflow;
// the router caps it at its own proxy timeout anyway.
const maxTimeoutSeconds = 365 * 24 * 3600

// parseSeconds reads a positive, finite number of seconds, as the SDKs send it ("29.5").
func parseSeconds(raw string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > maxTimeoutSeconds {
		return 0, false
	}
	d := time.Duration(f * float64(time.Second))
	if d <= 0 {
		return 0, false
	}
	return d, true
}
