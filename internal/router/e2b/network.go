package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"

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
// allow_internet_access false replaces denyOut with ALL_TRAFFIC. Header rules and a custom
// egress proxy are refused (403, as E2B does for a team without the feature).
func egressPolicy(allowOut, denyOut []string, rules map[string][]e2bapi.NetworkRule, egressProxy json.RawMessage, allowInternet *bool) (*egresspolicy.Policy, string, *refusal) {
	if len(egressProxy) > 0 && string(egressProxy) != "null" {
		return nil, "", &refusal{http.StatusForbidden, "network.egressProxy is not supported by Paddock's front door; leave it out"}
	}
	if len(rules) > 0 {
		return nil, "", &refusal{http.StatusForbidden, "network.rules (header transforms) are not supported by Paddock's E2B front door yet; " +
			"use a paddock.dev/egress inject rule with a Secret on the template (docs/security.md)"}
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
				return nil, "", badRequest("network.denyOut[%d]: %q is not an IP address or CIDR; denyOut takes only addresses (deny %s and list the domains in allowOut)", i, s, e2bapi.AllTraffic)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().IsUnspecified() && s != e2bapi.AllTraffic {
			return nil, "", badRequest("network.denyOut[%d]: %q is an unspecified address; only %s (ALL_TRAFFIC) may be", i, s, e2bapi.AllTraffic)
		}
		denyAll = denyAll || s == e2bapi.AllTraffic
	}
	for i, s := range allowOut {
		_, perr := netip.ParsePrefix(s)
		_, aerr := netip.ParseAddr(s)
		if perr != nil && aerr != nil && !denyAll {
			return nil, "", badRequest("network.allowOut[%d]: %q is a domain, and domains need ALL_TRAFFIC (%s) in denyOut", i, s, e2bapi.AllTraffic)
		}
	}
	spec := egress.Policy{Allow: allowOut, Deny: denyOut}
	p, err := egresspolicy.Compile(spec)
	if err != nil {
		return nil, "", badRequest("network: %v", err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, "", &refusal{http.StatusInternalServerError, err.Error()}
	}
	return p, string(b), nil
}

// networkAnnotations are a claim's annotations for create's network options: the policy, the
// network as given, allow_internet_access. Without either option there are none, and the
// template's policy (if any) applies.
func networkAnnotations(raw json.RawMessage, allowInternet *bool) (map[string]string, *refusal) {
	var n *e2bapi.NetworkConfig
	if len(raw) > 0 && string(raw) != "null" {
		n = &e2bapi.NetworkConfig{}
		if err := json.Unmarshal(raw, n); err != nil {
			return nil, badRequest("network: %v", err)
		}
	}
	if n == nil && allowInternet == nil {
		return nil, nil
	}
	if n == nil {
		n = &e2bapi.NetworkConfig{}
	}
	_, policy, ref := egressPolicy(n.AllowOut, n.DenyOut, n.Rules, n.EgressProxy, allowInternet)
	if ref != nil {
		return nil, ref
	}
	out := map[string]string{egress.PolicyAnnotation: policy}
	if len(raw) > 0 && string(raw) != "null" {
		b, _ := json.Marshal(n)
		out[e2bapi.NetworkAnnotation] = string(b)
	}
	if allowInternet != nil {
		out[e2bapi.AllowInternetAccessAnnotation] = strconv.FormatBool(*allowInternet)
	}
	return out, nil
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
	_, policy, ref := egressPolicy(body.AllowOut, body.DenyOut, body.Rules, body.EgressProxy, body.AllowInternetAccess)
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
		// Ingress options are fixed at create: keep them.
		cfg := e2bapi.NetworkConfig{AllowOut: body.AllowOut, DenyOut: body.DenyOut}
		if old, _ := networkOf(c); old != nil {
			cfg.AllowPublicTraffic, cfg.MaskRequestHost, cfg.HTTPSPorts = old.AllowPublicTraffic, old.MaskRequestHost, old.HTTPSPorts
		}
		n, _ := json.Marshal(cfg)
		annotations := map[string]any{egress.PolicyAnnotation: policy, e2bapi.NetworkAnnotation: string(n), e2bapi.AllowInternetAccessAnnotation: nil}
		if body.AllowInternetAccess != nil {
			annotations[e2bapi.AllowInternetAccessAnnotation] = strconv.FormatBool(*body.AllowInternetAccess)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		if err != nil {
			f.internal(w, err)
			return
		}
		if err := f.client.Patch(r.Context(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
