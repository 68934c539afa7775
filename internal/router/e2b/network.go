package e2b

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

// refusal is a request the front door answers with status and message.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func badRequest(format string, args ...any) *refusal {
	return &refusal{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// egressPolicy turns E2B's egress options into the policy the node enforces, with E2B's
// validation: denyOut takes addresses only; domains in allowOut need ALL_TRAFFIC in denyOut;
// allow_internet_access false replaces denyOut with ALL_TRAFFIC. rules become inject entries whose
// values are keys of Secret secret (headerRules); the values are returned for the front door to
// write there, nil when there are none. A custom egress proxy is refused (403, as E2B does for a
// team without the feature).
func egressPolicy(allowOut, denyOut []string, rules map[string][]e2bapi.NetworkRule, egressProxy json.RawMessage, allowInternet *bool, secret string) (string, map[string][]byte, *refusal) {
	if len(egressProxy) > 0 && string(egressProxy) != "null" {
		return "", nil, &refusal{http.StatusForbidden, "network.egressProxy is not supported by Paddock's front door; leave it out"}
	}
	inject, values, ref := headerRules(rules, secret)
	if ref != nil {
		return "", nil, ref
	}
	if allowInternet != nil && !*allowInternet {
		denyOut = []string{e2bapi.AllTraffic}
	}
	denyAll := false
	for i, s := range denyOut {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return "", nil, badRequest("network.denyOut[%d]: %q is not an IP address or CIDR; denyOut takes only addresses (deny %s and list the domains in allowOut)", i, s, e2bapi.AllTraffic)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().IsUnspecified() && s != e2bapi.AllTraffic {
			return "", nil, badRequest("network.denyOut[%d]: %q is an unspecified address; only %s (ALL_TRAFFIC) may be", i, s, e2bapi.AllTraffic)
		}
		denyAll = denyAll || s == e2bapi.AllTraffic
	}
	for i, s := range allowOut {
		_, perr := netip.ParsePrefix(s)
		_, aerr := netip.ParseAddr(s)
		if perr != nil && aerr != nil && !denyAll {
			return "", nil, badRequest("network.allowOut[%d]: %q is a domain, and domains need ALL_TRAFFIC (%s) in denyOut", i, s, e2bapi.AllTraffic)
		}
	}
	spec := egress.Policy{Allow: allowOut, Deny: denyOut, Inject: inject}
	if _, err := egresspolicy.Compile(spec); err != nil {
		return "", nil, badRequest("network: %v", err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "", nil, &refusal{http.StatusInternalServerError, err.Error()}
	}
	return string(b), values, nil
}

// E2B's limits on rules (SandboxNetworkConfig.rules).
const (
	maxRuleDomains      = 10
	maxRuleDomainLen    = 128
	maxRuleHeaders      = 20
	maxRuleHeaderName   = 64
	maxRuleHeaderValue  = 2048
	ruleSecretKeyPrefix = "header-"
)

// headerRules turns E2B's rules (per domain, at most one transform of headers added or replaced)
// into inject entries that read each value from key "header-<n>" of Secret secret, in domain
// then header-name order, with E2B's limits. Domains are lowercased; "*." wildcards are kept.
// Placeholders (${e2b.secrets.*}, ${e2b.identity.tokens.*}) name E2B Cloud stores Paddock does not
// have: refused rather than sent literally.
func headerRules(rules map[string][]e2bapi.NetworkRule, secret string) ([]egress.InjectRule, map[string][]byte, *refusal) {
	if len(rules) > maxRuleDomains {
		return nil, nil, badRequest("network.rules: %d domains, at most %d are allowed", len(rules), maxRuleDomains)
	}
	domains := slices.Sorted(maps.Keys(rules))
	var inject []egress.InjectRule
	values := map[string][]byte{}
	for _, d := range domains {
		field := fmt.Sprintf("network.rules[%q]", d)
		if len(d) == 0 || len(d) > maxRuleDomainLen {
			return nil, nil, badRequest("%s: a domain must have 1 to %d characters", field, maxRuleDomainLen)
		}
		if d == "*" {
			return nil, nil, badRequest("%s: a bare * is not a rules domain; name the host or a *.suffix", field)
		}
		var transforms int
		var rule *egress.InjectRule
		for _, r := range rules[d] {
			if r.Transform == nil {
				continue
			}
			if transforms++; transforms > 1 {
				return nil, nil, badRequest("%s: more than one transform; give each domain at most one", field)
			}
			if len(r.Transform.Headers) > maxRuleHeaders {
				return nil, nil, badRequest("%s: %d headers, at most %d are allowed", field, len(r.Transform.Headers), maxRuleHeaders)
			}
			rule = &egress.InjectRule{Domain: strings.ToLower(d)}
			for _, name := range slices.Sorted(maps.Keys(r.Transform.Headers)) {
				v := r.Transform.Headers[name]
				hf := fmt.Sprintf("%s.transform.headers[%q]", field, name)
				switch {
				case name == "" || len(name) > maxRuleHeaderName || !httpguts.ValidHeaderFieldName(name):
					return nil, nil, badRequest("%s: a header name must be an HTTP token of 1 to %d characters", hf, maxRuleHeaderName)
				case len(v) > maxRuleHeaderValue:
					return nil, nil, badRequest("%s: the value has %d characters, at most %d are allowed", hf, len(v), maxRuleHeaderValue)
				case !httpguts.ValidHeaderFieldValue(v):
					return nil, nil, badRequest("%s: the value has a control character; give a plain header value", hf)
				case strings.Contains(v, "${e2b."):
					return nil, nil, badRequest("%s: placeholders (${e2b.secrets...}, ${e2b.identity.tokens...}) are not supported by Paddock; give the value itself", hf)
				}
				key := fmt.Sprintf("%s%d", ruleSecretKeyPrefix, len(values))
				values[key] = []byte(v)
				rule.Headers = append(rule.Headers, egress.Header{Name: name, SecretKeyRef: egress.SecretKeyRef{Name: secret, Key: key}})
			}
		}
		if rule != nil && len(rule.Headers) > 0 {
			inject = append(inject, *rule)
		}
	}
	if len(values) == 0 {
		return nil, nil, nil
	}
	return inject, values, nil
}

// redactedValue stands for a header value in getInfo's rules: the values are in the claim's
// Secret, never shown back.
const redactedValue = "[redacted]"

// redactRules is rules with every header value replaced by redactedValue, and the domains
// lowercased (as E2B stores them).
func redactRules(rules map[string][]e2bapi.NetworkRule) map[string][]e2bapi.NetworkRule {
	if rules == nil {
		return nil
	}
	out := make(map[string][]e2bapi.NetworkRule, len(rules))
	for d, rs := range rules {
		for _, r := range rs {
			var nr e2bapi.NetworkRule
			if r.Transform != nil {
				nr.Transform = &e2bapi.NetworkTransform{Headers: map[string]string{}}
				for k := range r.Transform.Headers {
					nr.Transform.Headers[k] = redactedValue
				}
			}
			out[strings.ToLower(d)] = append(out[strings.ToLower(d)], nr)
		}
	}
	return out
}

// networkAnnotations are a claim's annotations for create's network options: the policy, the
// network as given (header values redacted), allow_internet_access. Without either option there
// are none, and the template's policy (if any) applies. values are rules' header values, for
// Secret secret, which the policy's inject entries name; nil when there are none.
func networkAnnotations(raw json.RawMessage, allowInternet *bool, secret string) (map[string]string, map[string][]byte, *refusal) {
	var n *e2bapi.NetworkConfig
	if len(raw) > 0 && string(raw) != "null" {
		n = &e2bapi.NetworkConfig{}
		if err := json.Unmarshal(raw, n); err != nil {
			return nil, nil, badRequest("network: %v", err)
		}
	}
	if n == nil && allowInternet == nil {
		return nil, nil, nil
	}
	if n == nil {
		n = &e2bapi.NetworkConfig{}
	}
	policy, values, ref := egressPolicy(n.AllowOut, n.DenyOut, n.Rules, n.EgressProxy, allowInternet, secret)
	if ref != nil {
		return nil, nil, ref
	}
	out := map[string]string{egress.PolicyAnnotation: policy}
	if len(raw) > 0 && string(raw) != "null" {
		n.Rules = redactRules(n.Rules)
		b, _ := json.Marshal(n)
		out[e2bapi.NetworkAnnotation] = string(b)
	}
	if allowInternet != nil {
		out[e2bapi.AllowInternetAccessAnnotation] = strconv.FormatBool(*allowInternet)
	}
	return out, values, nil
}

// networkOf is getInfo's network and allowInternetAccess, from the claim's annotations.
func networkOf(c *extensionsv1beta1.SandboxClaim) (*e2bapi.NetworkConfig, *bool) {
	var n *e2bapi.NetworkConfig
	if raw, ok := c.Annotations[e2bapi.NetworkAnnotation]; ok {
		n = &e2bapi.NetworkConfig{}
		if json.Unmarshal([]byte(raw), n) != nil {
			n = nil
		}
	}
	var allow *bool
	if v, err := strconv.ParseBool(c.Annotations[e2bapi.AllowInternetAccessAnnotation]); err == nil {
		allow = &v
	}
	return n, allow
}

// updateNetwork serves PUT /sandboxes/{id}/network: the body replaces the whole egress
// configuration ({} opens it), live, without a restart; 204, or 409 when the sandbox is paused.
func (f *FrontDoor) updateNetwork(w http.ResponseWriter, r *http.Request, ns string) {
	var body e2bapi.NetworkUpdate
	if !readBody(w, r, &body) {
		return
	}
	secret, err := newRuleSecretName()
	if err != nil {
		f.internal(w, err)
		return
	}
	policy, values, ref := egressPolicy(body.AllowOut, body.DenyOut, body.Rules, body.EgressProxy, body.AllowInternetAccess, secret)
	if ref != nil {
		writeError(w, ref.status, ref.msg)
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		// As E2B: a paused sandbox's network is not changed (409); resume it first.
		switch sb, err := f.boundSandbox(r.Context(), c); {
		case err != nil:
			f.internal(w, err)
			return
		case sb != nil && stateOf(sb) == e2bapi.StatePaused:
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is paused; resume it (connect) before changing its network", c.Name))
			return
		}
		// Ingress options are fixed at create: keep them. Header values stay in the Secret.
		cfg := e2bapi.NetworkConfig{AllowOut: body.AllowOut, DenyOut: body.DenyOut, Rules: redactRules(body.Rules)}
		if old, _ := networkOf(c); old != nil {
			cfg.AllowPublicTraffic, cfg.MaskRequestHost, cfg.HTTPSPorts = old.AllowPublicTraffic, old.MaskRequestHost, old.HTTPSPorts
		}
		n, _ := json.Marshal(cfg)
		annotations := map[string]any{egress.PolicyAnnotation: policy, e2bapi.NetworkAnnotation: string(n), e2bapi.AllowInternetAccessAnnotation: nil,
			e2bapi.RulesSecretAnnotation: nil}
		if values != nil {
			annotations[e2bapi.RulesSecretAnnotation] = secret
		}
		if body.AllowInternetAccess != nil {
			annotations[e2bapi.AllowInternetAccessAnnotation] = strconv.FormatBool(*body.AllowInternetAccess)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		if err != nil {
			f.internal(w, err)
			return
		}
		// The new values go to a new Secret, the policy moves to it, then the old one is deleted:
		// the sandbox never sees a policy naming a missing or half-written Secret.
		if values != nil {
			if err := f.createRuleSecret(r.Context(), c, secret, values); err != nil {
				f.internal(w, err)
				return
			}
		}
		// The claim's share of its previous Secret: other claims sharing it (a fork and its
		// source) keep it.
		replaced := c.Annotations[e2bapi.RulesSecretAnnotation]
		if err := f.client.Patch(r.Context(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			if values != nil {
				_ = f.deleteRuleSecret(r.Context(), c.Namespace, secret)
			}
			f.internal(w, err)
			return
		}
		if err := f.releaseRuleSecret(r.Context(), c, replaced); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
