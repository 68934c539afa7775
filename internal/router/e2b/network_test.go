package e2b

import (
	"encoding/json"
	"errors"
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
		{name: "rules", network: `{"allowOut":["api.example.test"],"denyOut":["0.0.0.0/0"],"rules":{"api.example.test":[{"transform":{"headers":{"Authorization":"Bearer x"}}}]}}`,
			status: 403, errSubstr: "network.rules"},
		{name: "egress proxy", network: `{"egressProxy":{"address":"proxy.example.test:1080"}}`, status: 403, errSubstr: "network.egressProxy"},
		{name: "not an object", network: `[1]`, status: 400, errSubstr: "network:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ref := networkAnnotations(json.RawMessage(tc.network), tc.allow)
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
	if _, err := parseCreate(e2bapi.CreateRequest{Network: json.RawMessage(`{"rules":{"a.test":[{}]}}`)}); err == nil {
		t.Error("rules were accepted")
	} else if ref := (*refusal)(nil); !errors.As(err, &ref) || ref.status != http.StatusForbidden {
		t.Errorf("rules: got %v, want a 403 refusal", err)
	}
}
