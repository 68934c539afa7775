package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
)

func TestNetworkAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		network   string
		allow     *bool
		policy    string // "" for no annotations at all
		status    int
		errSubstr string
	}{
		{name: "nothing", policy: ""},
		{name: "allow list", network: `{"allowOut":["api.example.test","*.cdn.example.test","203.0.113.7"],"denyOut":["0.0.0.0/0"]}`,
			policy: `{"allow":["api.example.test","*.cdn.example.test","203.0.113.7"],"deny":["0.0.0.0/0"]}`},
		{name: "allow_internet_access false denies all", allow: ptr.To(false), policy: `{"deny":["0.0.0.0/0"]}`},
		{name: "allow_internet_access false replaces denyOut, keeps allowOut", network: `{"allowOut":["pypi.org"],"denyOut":["203.0.113.0/24"]}`, allow: ptr.To(false),
			policy: `{"allow":["pypi.org"],"deny":["0.0.0.0/0"]}`},
		{name: "deny some", network: `{"denyOut":["203.0.113.0/24"]}`, policy: `{"deny":["203.0.113.0/24"]}`},
		{name: "domain in denyOut", network: `{"denyOut":["evil.test"]}`, status: 400, errSubstr: `network.denyOut[0]: "evil.test" is not an IP address or CIDR`},
		{name: "unspecified in denyOut", network: `{"denyOut":["0.0.0.0/8"]}`, status: 400, errSubstr: `only 0.0.0.0/0 (ALL_TRAFFIC)`},
		{name: "domain without ALL_TRAFFIC", network: `{"allowOut":["pypi.org"],"denyOut":["203.0.113.0/24"]}`, status: 400, errSubstr: `network.allowOut[0]: "pypi.org" is a domain, and domains need ALL_TRAFFIC`},
		{name: "private address", network: `{"allowOut":["10.0.0.1"],"denyOut":["0.0.0.0/0"]}`, status: 400, errSubstr: `allow[0]: "10.0.0.1" lies in 10.0.0.0/8`},
		{name: "rules become inject entries", network: `{"allowOut":["api.example.test"],"denyOut":["0.0.0.0/0"],"rules":{"API.example.test":[{"transform":{"headers":{"X-B":"value-b","Authorization":"Bearer value-x"}}}],"*.cdn.example.test":[{}],"up.example.test":[{"transform":{"headers":{"X-Up":"value-u"}}}]}}`,
			policy: `{"allow":["api.example.test"],"deny":["0.0.0.0/0"],"inject":[` +
				`{"domain":"api.example.test","headers":[{"name":"Authorization","secretKeyRef":{"name":"e2b-egress-t","key":"header-0"}},{"name":"X-B","secretKeyRef":{"name":"e2b-egress-t","key":"header-1"}}]},` +
				`{"domain":"up.example.test","headers":[{"name":"X-Up","secretKeyRef":{"name":"e2b-egress-t","key":"header-2"}}]}]}`},
		{name: "two transforms for a domain", network: `{"rules":{"a.test":[{"transform":{"headers":{"A":"1"}}},{"transform":{"headers":{"B":"2"}}}]}}`,
			status: 400, errSubstr: `network.rules["a.test"]: more than one transform`},
		{name: "placeholder", network: `{"rules":{"a.test":[{"transform":{"headers":{"A":"Bearer ${e2b.secrets.k}"}}}]}}`,
			status: 400, errSubstr: `network.rules["a.test"].transform.headers["A"]: placeholders`},
		{name: "bad header name", network: `{"rules":{"a.test":[{"transform":{"headers":{"A B":"1"}}}]}}`,
			status: 400, errSubstr: `network.rules["a.test"].transform.headers["A B"]: a header name must be an HTTP token`},
		{name: "header value with a newline", network: `{"rules":{"a.test":[{"transform":{"headers":{"A":"1\r\nX: 2"}}}]}}`,
			status: 400, errSubstr: `control character`},
		{name: "header value too long", network: `{"rules":{"a.test":[{"transform":{"headers":{"A":"` + strings.Repeat("v", 2049) + `"}}}]}}`,
			status: 400, errSubstr: `the value has 2049 characters, at most 2048`},
		{name: "too many domains", network: `{"rules":{` + manyRules(11) + `}}`, status: 400, errSubstr: `network.rules: 11 domains, at most 10`},
		{name: "domain too long", network: `{"rules":{"` + strings.Repeat("a", 129) + `":[{}]}}`, status: 400, errSubstr: `a domain must have 1 to 128 characters`},
		{name: "header that frames the request", network: `{"rules":{"a.test":[{"transform":{"headers":{"Host":"b.test"}}}]}}`,
			status: 400, errSubstr: `inject[0].headers[0].name: "Host" frames the request`},
		{name: "bare wildcard", network: `{"rules":{"*":[{"transform":{"headers":{"A":"1"}}}]}}`, status: 400, errSubstr: `network.rules["*"]: a bare * is not a rules domain`},
		{name: "not a domain", network: `{"rules":{"a b":[{"transform":{"headers":{"A":"1"}}}]}}`, status: 400, errSubstr: `inject[0].domain`},
		{name: "egress proxy", network: `{"egressProxy":{"address":"proxy.example.test:1080"}}`, status: 403, errSubstr: "network.egressProxy"},
		{name: "not an object", network: `[1]`, status: 400, errSubstr: "network:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, values, ref := networkAnnotations(json.RawMessage(tc.network), tc.allow, "e2b-egress-t")
			if tc.status != 0 {
				if ref == nil || ref.status != tc.status || !strings.Contains(ref.msg, tc.errSubstr) {
					t.Fatalf("got %v %+v, want %d with %q", got, ref, tc.status, tc.errSubstr)
				}
				return
			}
			if ref != nil {
				t.Fatal(ref)
			}
			if tc.policy == "" {
				if got != nil {
					t.Fatalf("got %v, want no annotations", got)
				}
				return
			}
			if diff := cmp.Diff(tc.policy, got[egress.PolicyAnnotation]); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if tc.allow != nil && got[e2bapi.AllowInternetAccessAnnotation] != "false" {
				t.Errorf("allow_internet_access not kept: %v", got)
			}
			if tc.network != "" && got[e2bapi.NetworkAnnotation] == "" {
				t.Errorf("network not kept for getInfo: %v", got)
			}
			for k, v := range values {
				if strings.Contains(got[e2bapi.NetworkAnnotation], string(v)) {
					t.Errorf("the network annotation %s shows header value %s=%q; it must only be in the Secret", got[e2bapi.NetworkAnnotation], k, v)
				}
			}
		})
	}
}

func TestCreateCarriesTheNetworkToTheClaimAndGetInfo(t *testing.T) {
	req, err := parseCreate(e2bapi.CreateRequest{TemplateID: "base", AllowInternetAccess: ptr.To(false),
		Network: json.RawMessage(`{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	c := newClaim("ns", "id", "base", req, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if c.Annotations[egress.PolicyAnnotation] != `{"allow":["pypi.org"],"deny":["0.0.0.0/0"]}` {
		t.Errorf("claim policy %q", c.Annotations[egress.PolicyAnnotation])
	}
	n, allow := networkOf(c)
	want := &e2bapi.NetworkConfig{AllowOut: []string{"pypi.org"}, DenyOut: []string{"0.0.0.0/0"}, AllowPublicTraffic: ptr.To(false)}
	if diff := cmp.Diff(want, n); diff != "" || allow == nil || *allow {
		t.Errorf("getInfo network (-want +got):\n%s; allowInternetAccess %v", diff, allow)
	}
	if _, err := parseCreate(e2bapi.CreateRequest{Network: json.RawMessage(`{"egressProxy":{"address":"proxy.example.test:1080"}}`)}); err == nil {
		t.Error("egressProxy was accepted")
	} else if ref := (*refusal)(nil); !errors.As(err, &ref) || ref.status != http.StatusForbidden {
		t.Errorf("egressProxy: got %v, want a 403 refusal", err)
	}
	// rules: the claim's policy names the request's fresh Secret, which will hold the value.
	req, err = parseCreate(e2bapi.CreateRequest{Network: json.RawMessage(`{"rules":{"a.test":[{"transform":{"headers":{"A":"v"}}}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(req.ruleSecret, ruleSecretPrefix) || string(req.ruleValues["header-0"]) != "v" {
		t.Errorf("rules Secret %q values %q", req.ruleSecret, req.ruleValues)
	}
	c = newClaim("ns", "id", "base", req, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if want := `{"inject":[{"domain":"a.test","headers":[{"name":"A","secretKeyRef":{"name":"` + req.ruleSecret + `","key":"header-0"}}]}]}`; c.Annotations[egress.PolicyAnnotation] != want {
		t.Errorf("claim policy %s, want %s", c.Annotations[egress.PolicyAnnotation], want)
	}
	if c.Annotations[e2bapi.RulesSecretAnnotation] != req.ruleSecret {
		t.Errorf("claim annotations %v do not name the rules Secret %s as the claim's own", c.Annotations, req.ruleSecret)
	}
	// A fork shares its source's Secret (its claim becomes one more owner, createClaim) and
	// names it, so that its network update gives up that share.
	forkReq := forkRequest(c, time.Hour)
	fork := newClaim("ns", "fork", "base", forkReq, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if fork.Annotations[egress.PolicyAnnotation] != c.Annotations[egress.PolicyAnnotation] {
		t.Errorf("fork policy %s, want its source's %s", fork.Annotations[egress.PolicyAnnotation], c.Annotations[egress.PolicyAnnotation])
	}
	if forkReq.ruleValues != nil || forkReq.sharedRuleSecret != req.ruleSecret || fork.Annotations[e2bapi.RulesSecretAnnotation] != req.ruleSecret {
		t.Errorf("fork request values %v, shared Secret %q, claim annotations %v; want no values of its own and the source's Secret %s shared",
			forkReq.ruleValues, forkReq.sharedRuleSecret, fork.Annotations, req.ruleSecret)
	}
}

// manyRules is n rules domains, each with a header.
func manyRules(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"d%d.test":[{"transform":{"headers":{"A":"1"}}}]`, i))
	}
	return strings.Join(parts, ",")
}

// The rules' values go to the Secret under the keys the policy names, and getInfo's copy shows
// the domains and header names with the values redacted.
func TestRulesValuesGoToTheSecretOnly(t *testing.T) {
	network := `{"allowOut":["api.example.test"],"denyOut":["0.0.0.0/0"],"rules":{"API.example.test":[{"transform":{"headers":{"Authorization":"Bearer sk-1","X-Org":"org-7"}}}],"plain.example.test":[{}]}}`
	got, values, ref := networkAnnotations(json.RawMessage(network), nil, "e2b-egress-t")
	if ref != nil {
		t.Fatal(ref)
	}
	if diff := cmp.Diff(map[string][]byte{"header-0": []byte("Bearer sk-1"), "header-1": []byte("org-7")}, values); diff != "" {
		t.Errorf("Secret values (-want +got):\n%s", diff)
	}
	var shown e2bapi.NetworkConfig
	if err := json.Unmarshal([]byte(got[e2bapi.NetworkAnnotation]), &shown); err != nil {
		t.Fatal(err)
	}
	want := map[string][]e2bapi.NetworkRule{
		"api.example.test":   {{Transform: &e2bapi.NetworkTransform{Headers: map[string]string{"Authorization": redactedValue, "X-Org": redactedValue}}}},
		"plain.example.test": {{}},
	}
	if diff := cmp.Diff(want, shown.Rules); diff != "" {
		t.Errorf("getInfo rules (-want +got):\n%s", diff)
	}
	// Rules without any header write no Secret.
	if _, values, ref := networkAnnotations(json.RawMessage(`{"rules":{"a.test":[{}]}}`), nil, "e2b-egress-t"); ref != nil || values != nil {
		t.Errorf("rules without headers: values %v, refusal %v; want neither", values, ref)
	}
}
