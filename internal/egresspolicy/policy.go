package egresspolicy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/paddock-dev/paddock/api/egress"
	egressranges "github.com/paddock-dev/paddock/internal/egress"
)

// Limits on a policy's size, so one annotation cannot make the node's work unbounded.
const (
	MaxEntries       = 256
	MaxInjectDomains = 32
	MaxHeaders       = 20
	MaxHeaderValue   = 8192
)

// forbiddenHeaders frame the request or steer the proxy; a rule may not set them.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Expect": true,
}

// Policy is a validated policy, ready to decide.
type Policy struct {
	spec       egress.Policy
	anyName    bool
	exact      map[string]bool
	suffixes   []string // ".example.com" for "*.example.com"
	allowAddrs []netip.Prefix
	denyAddrs  []netip.Prefix
	denyAll    bool
	inject     map[string]int // domain as written (lowercase) -> index in spec.Inject
}

// Parse reads the JSON of api/egress.PolicyAnnotation and validates it. Errors name the
// annotation, the field and the fix.
func Parse(annotation string) (*Policy, error) {
	var spec egress.Policy
	dec := json.NewDecoder(bytes.NewReader([]byte(annotation)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%s: not a policy document (fields allow, deny, inject): %w", egress.PolicyAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: one JSON object expected, found more after it", egress.PolicyAnnotation)
	}
	p, err := Compile(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", egress.PolicyAnnotation, err)
	}
	return p, nil
}

// Compile validates spec. Errors name the field (allow[2], inject[0].headers[1].name) and the fix.
func Compile(spec egress.Policy) (*Policy, error) {
	p := &Policy{spec: spec, exact: map[string]bool{}, inject: map[string]int{}}
	if len(spec.Allow) > MaxEntries || len(spec.Deny) > MaxEntries {
		return nil, fmt.Errorf("allow and deny take at most %d entries each (allow has %d, deny %d); use CIDRs or wildcards", MaxEntries, len(spec.Allow), len(spec.Deny))
	}
	for i, s := range spec.Allow {
		if err := p.addAllow(s); err != nil {
			return nil, fmt.Errorf("allow[%d]: %w", i, err)
		}
	}
	for i, s := range spec.Deny {
		pfx, err := parseAddr(s)
		if err != nil {
			if isDomainLike(s) {
				return nil, fmt.Errorf("deny[%d]: %q is a domain; deny takes IPv4 addresses and CIDRs only (deny %q and allow the domains you want)", i, s, egress.AllTraffic)
			}
			return nil, fmt.Errorf("deny[%d]: %w", i, err)
		}
		p.denyAddrs = append(p.denyAddrs, pfx)
		p.denyAll = p.denyAll || pfx.Bits() == 0
	}
	if len(spec.Inject) > MaxInjectDomains {
		return nil, fmt.Errorf("inject takes at most %d domains, has %d", MaxInjectDomains, len(spec.Inject))
	}
	for i, r := range spec.Inject {
		if err := p.addInject(i, r); err != nil {
			return nil, fmt.Errorf("inject[%d]%w", i, err)
		}
	}
	return p, nil
}

func (p *Policy) addAllow(s string) error {
	if s == "*" {
		p.anyName = true
		return nil
	}
	if pfx, err := parseAddr(s); err == nil {
		for _, d := range defaultDeny {
			if d.Contains(pfx.Addr()) && d.Bits() <= pfx.Bits() {
				return fmt.Errorf("%q lies in %s, which is always denied (private, link-local and cluster ranges); remove it", s, d)
			}
		}
		p.allowAddrs = append(p.allowAddrs, pfx)
		return nil
	} else if !isDomainLike(s) {
		return err
	}
	name, wildcard, err := parseDomain(s)
	if err != nil {
		return err
	}
	if wildcard {
		p.suffixes = append(p.suffixes, "."+name)
	} else {
		p.exact[name] = true
	}
	return nil
}

func (p *Policy) addInject(i int, r egress.InjectRule) error {
	name, wildcard, err := parseDomain(r.Domain)
	if err != nil {
		return fmt.Errorf(".domain: %w", err)
	}
	key := name
	if wildcard {
		key = "*." + name
	}
	if j, dup := p.inject[key]; dup {
		return fmt.Errorf(".domain: %q is also inject[%d]; put all of a domain's headers in one rule", r.Domain, j)
	}
	p.inject[key] = i
	if len(r.Headers) == 0 || len(r.Headers) > MaxHeaders {
		return fmt.Errorf(".headers: between 1 and %d headers, has %d", MaxHeaders, len(r.Headers))
	}
	seen := map[string]int{}
	for j, h := range r.Headers {
		canon := http.CanonicalHeaderKey(h.Name)
		switch {
		case !httpguts.ValidHeaderFieldName(h.Name):
			return fmt.Errorf(".headers[%d].name: %q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)", j, h.Name)
		case forbiddenHeaders[canon] || strings.HasPrefix(canon, "Proxy-"):
			return fmt.Errorf(".headers[%d].name: %q frames the request and cannot be injected; choose another header", j, h.Name)
		}
		if k, dup := seen[canon]; dup {
			return fmt.Errorf(".headers[%d].name: %q is also headers[%d]; set each header once", j, h.Name, k)
		}
		seen[canon] = j
		if errs := validation.IsDNS1123Subdomain(h.SecretKeyRef.Name); len(errs) > 0 {
			return fmt.Errorf(".headers[%d].secretKeyRef.name: %q is not a Secret name: %s", j, h.SecretKeyRef.Name, strings.Join(errs, "; "))
		}
		if errs := validation.IsConfigMapKey(h.SecretKeyRef.Key); len(errs) > 0 {
			return fmt.Errorf(".headers[%d].secretKeyRef.key: %q is not a Secret key: %s", j, h.SecretKeyRef.Key, strings.Join(errs, "; "))
		}
	}
	return nil
}

// Spec is the policy as written.
func (p *Policy) Spec() egress.Policy { return p.spec }

// DeniesAll reports whether deny holds 0.0.0.0/0: then only what allow names is reachable.
func (p *Policy) DeniesAll() bool { return p.denyAll }

// Names reports whether host name matches an allow domain (exact, a wildcard, or "*").
func (p *Policy) Names(name string) bool {
	name = normalize(name)
	if name == "" {
		return false
	}
	if p.anyName || p.exact[name] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Resolvable reports whether the egress DNS may resolve name upstream for this sandbox: every
// name unless the policy denies all, then only the names allow matches. Any other name gets
// NXDOMAIN without a query leaving the node, so DNS cannot carry data out.
func (p *Policy) Resolvable(name string) bool { return !p.denyAll || p.Names(name) }

// Query is one connection to decide.
type Query struct {
	// Dst is the address the sandbox connected to.
	Dst netip.Addr
	// Name is the host name the client sent (TLS SNI or HTTP Host), "" when none.
	Name string
	// NameResolvesToDst says whether Dst is an address Name resolves to.
	NameResolvesToDst bool
}

// Verdict is a decision and the rule that made it.
type Verdict struct {
	Allowed bool
	// Rule says why, for logs and refusals: "allow domain", "allow address", "deny", "default".
	Rule string
}

// Decide applies the policy to q. The always-denied ranges are the caller's (Ranges.Contains)
// and come first.
func (p *Policy) Decide(q Query) Verdict {
	dst := q.Dst.Unmap()
	switch {
	case !dst.Is4():
		return Verdict{Rule: "IPv6 is never routed for a policed sandbox"}
	case q.Name != "" && q.NameResolvesToDst && p.Names(q.Name):
		return Verdict{Allowed: true, Rule: "allow domain"}
	case containsAny(p.allowAddrs, dst):
		return Verdict{Allowed: true, Rule: "allow address"}
	case containsAny(p.denyAddrs, dst):
		return Verdict{Rule: "deny"}
	default:
		return Verdict{Allowed: true, Rule: "default"}
	}
}

// AddressDecides reports whether the destination alone decides a connection to dst, so no name
// need be read: dst is allowed by address or refused whatever the name.
func (p *Policy) AddressDecides(dst netip.Addr) bool {
	dst = dst.Unmap()
	if containsAny(p.allowAddrs, dst) {
		return true
	}
	return !p.anyName && len(p.exact) == 0 && len(p.suffixes) == 0
}

// Inject returns the rule for host name: an exact domain first, then the longest wildcard.
func (p *Policy) Inject(name string) (egress.InjectRule, bool) {
	name = normalize(name)
	if i, ok := p.inject[name]; ok {
		return p.spec.Inject[i], true
	}
	best, found := -1, false
	for rest := name; ; {
		_, after, ok := strings.Cut(rest, ".")
		if !ok {
			break
		}
		if i, ok := p.inject["*."+after]; ok {
			best, found = i, true
			break // the first suffix found is the longest
		}
		rest = after
	}
	if !found {
		return egress.InjectRule{}, false
	}
	return p.spec.Inject[best], true
}

// HasInject reports whether any inject rule exists.
func (p *Policy) HasInject() bool { return len(p.spec.Inject) > 0 }

// Effective is the policy annotation that applies to a claim's Sandbox: the claim's when it
// has one, which replaces the template's whole, else the template's.
func Effective(templateAnnotations, claimAnnotations map[string]string) (string, bool) {
	if v, ok := claimAnnotations[egress.PolicyAnnotation]; ok {
		return v, true
	}
	v, ok := templateAnnotations[egress.PolicyAnnotation]
	return v, ok
}

// Ranges is a set of address ranges.
type Ranges []netip.Prefix

// Contains reports whether a lies in one of r.
func (r Ranges) Contains(a netip.Addr) bool { return containsAny(r, a.Unmap()) }

// builtinDeny are addresses a node-side proxy must never dial for a sandbox: the node's own
// loopback and "this network", multicast and reserved space.
var builtinDeny = mustPrefixes("127.0.0.0/8", "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4", "100.64.0.0/10")

var defaultDeny = mustPrefixes(egressranges.Defaults...)

// AlwaysDeny is what every policed sandbox is refused whatever its policy: the managed
// NetworkPolicy's defaults, the built-ins above and cluster, the cluster's own ranges (as
// internal/egress.Deny returns them).
func AlwaysDeny(cluster []string) (Ranges, error) {
	out := append(append(Ranges{}, defaultDeny...), builtinDeny...)
	for i, s := range cluster {
		p, err := parseAnyAddr(s)
		if err != nil {
			return nil, fmt.Errorf("cluster range %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var errIPv6 = errors.New("IPv6 is never routed for a policed sandbox; remove the entry")

// parseAddr reads an IPv4 address or a masked IPv4 CIDR.
func parseAddr(s string) (netip.Prefix, error) {
	p, err := parseAnyAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q: %w", s, errIPv6)
	}
	return p, nil
}

func parseAnyAddr(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set; write %s", s, p.Masked())
		}
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address, CIDR or domain", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// isDomainLike tells a name meant as a domain from a malformed address.
func isDomainLike(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r == '*' || r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
	}) &&
		!strings.ContainsAny(s, ":/")
}

// parseDomain reads "example.com" or "*.example.com" (lowercased, trailing dot dropped).
func parseDomain(s string) (name string, wildcard bool, err error) {
	name = normalize(s)
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, wildcard = rest, true
	}
	if strings.Contains(name, "*") {
		return "", false, fmt.Errorf("%q: a wildcard is only \"*\" alone or a leading \"*.\" (e.g. *.example.com)", s)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", false, fmt.Errorf("%q is not a domain: %s", s, strings.Join(errs, "; "))
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return "", false, fmt.Errorf("%q: an address cannot take a wildcard", s)
	}
	return name, wildcard, nil
}

func normalize(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// Hash identifies a policy annotation value in a Status: the first 16 hex digits of its SHA-256.
func Hash(annotation string) string {
	sum := sha256.Sum256([]byte(annotation))
	return hex.EncodeToString(sum[:8])
}
