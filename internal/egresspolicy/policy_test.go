package egresspolicy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/api/egress"
)

func TestParseRejectsWithTheFieldAndTheFix(t *testing.T) {
	hdr := func(name string) string {
		return `{"name":"` + name + `","secretKeyRef":{"name":"s","key":"k"}}`
	}
	cases := []struct {
		name, doc, want string
	}{
		{"not json", `allow: [x]`, "paddock.dev/egress: not a policy document"},
		{"unknown field", `{"allowOut":["x.com"]}`, `unknown field "allowOut"`},
		{"two documents", `{} {}`, "one JSON object expected"},
		{"domain in deny", `{"deny":["example.com"]}`, `deny[0]: "example.com" is a domain; deny takes IPv4 addresses and CIDRs only`},
		{"ipv6 in deny", `{"deny":["::/0"]}`, `deny[0]: "::/0": IPv6 is never routed`},
		{"ipv6 in allow", `{"allow":["2001:db8::1"]}`, `allow[0]: "2001:db8::1": IPv6 is never routed`},
		{"host bits", `{"allow":["203.0.113.7/24"]}`, `allow[0]: "203.0.113.7/24" has host bits set; write 203.0.113.0/24`},
		{"bad cidr", `{"deny":["203.0.113.0/33"]}`, `deny[0]: "203.0.113.0/33" is not an IPv4 address, CIDR or domain`},
		{"private allow", `{"allow":["10.1.2.3"]}`, `allow[0]: "10.1.2.3" lies in 10.0.0.0/8, which is always denied`},
		{"metadata allow", `{"allow":["169.254.169.254"]}`, `lies in 169.254.0.0/16`},
		{"mid wildcard", `{"allow":["a.*.example.com"]}`, `allow[0]: "a.*.example.com": a wildcard is only "*" alone or a leading "*."`},
		{"bad domain", `{"allow":["ex ample.com"]}`, `allow[0]: "ex ample.com" is not a domain`},
		{"wildcard address", `{"allow":["*.1.2.3.4"]}`, `an address cannot take a wildcard`},
		{"inject no headers", `{"inject":[{"domain":"a.com","headers":[]}]}`, `inject[0].headers: between 1 and 20 headers, has 0`},
		{"inject bad domain", `{"inject":[{"domain":"*","headers":[` + hdr("X") + `]}]}`, `inject[0].domain: "*"`},
		{"inject duplicate domain", `{"inject":[{"domain":"A.com","headers":[` + hdr("X") + `]},{"domain":"a.com.","headers":[` + hdr("Y") + `]}]}`, `inject[1].domain: "a.com." is also inject[0]`},
		{"inject host", `{"inject":[{"domain":"a.com","headers":[` + hdr("host") + `]}]}`, `inject[0].headers[0].name: "host" frames the request`},
		{"inject proxy header", `{"inject":[{"domain":"a.com","headers":[` + hdr("Proxy-Authorization") + `]}]}`, `frames the request`},
		{"inject bad name", `{"inject":[{"domain":"a.com","headers":[` + hdr("X Y") + `]}]}`, `inject[0].headers[0].name: "X Y" is not a valid header name`},
		{"inject duplicate header", `{"inject":[{"domain":"a.com","headers":[` + hdr("x-a") + `,` + hdr("X-A") + `]}]}`, `inject[0].headers[1].name: "X-A" is also headers[0]`},
		{"inject secret name", `{"inject":[{"domain":"a.com","headers":[{"name":"A","secretKeyRef":{"name":"Bad_Name","key":"k"}}]}]}`, `inject[0].headers[0].secretKeyRef.name: "Bad_Name" is not a Secret name`},
		{"inject secret key", `{"inject":[{"domain":"a.com","headers":[{"name":"A","secretKeyRef":{"name":"s","key":""}}]}]}`, `inject[0].headers[0].secretKeyRef.key: "" is not a Secret key`},
		{"too many", `{"deny":[` + strings.Repeat(`"1.2.3.4",`, MaxEntries) + `"1.2.3.4"]}`, `at most 256 entries each`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%s) = %v, want an error containing %q", tc.doc, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), egress.PolicyAnnotation+": ") {
				t.Errorf("error %q does not name the annotation", err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	denyAll := `{"allow":["pypi.org","*.pythonhosted.org","203.0.113.7","198.51.100.0/24"],"deny":["0.0.0.0/0"]}`
	blockSome := `{"deny":["203.0.113.0/24"],"allow":["ok.example.test"]}`
	star := `{"allow":["*"],"deny":["0.0.0.0/0"]}`
	open := `{}`
	a := netip.MustParseAddr
	cases := []struct {
		name, policy string
		q            Query
		want         Verdict
	}{
		{"domain allowed and resolves", denyAll, Query{Dst: a("192.0.2.10"), Name: "pypi.org", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"domain case and trailing dot", denyAll, Query{Dst: a("192.0.2.10"), Name: "PyPI.org.", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"fronting: allowed name to another address", denyAll, Query{Dst: a("192.0.2.10"), Name: "pypi.org"}, Verdict{false, "deny"}},
		{"wildcard subdomain", denyAll, Query{Dst: a("192.0.2.10"), Name: "files.pythonhosted.org", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"wildcard deep subdomain", denyAll, Query{Dst: a("192.0.2.10"), Name: "a.b.pythonhosted.org", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"wildcard is not the apex", denyAll, Query{Dst: a("192.0.2.10"), Name: "pythonhosted.org", NameResolvesToDst: true}, Verdict{false, "deny"}},
		{"suffix is not a subdomain", denyAll, Query{Dst: a("192.0.2.10"), Name: "evilpythonhosted.org", NameResolvesToDst: true}, Verdict{false, "deny"}},
		{"other name", denyAll, Query{Dst: a("192.0.2.10"), Name: "evil.test", NameResolvesToDst: true}, Verdict{false, "deny"}},
		{"raw ip allowed", denyAll, Query{Dst: a("203.0.113.7")}, Verdict{true, "allow address"}},
		{"raw ip in allowed cidr", denyAll, Query{Dst: a("198.51.100.200")}, Verdict{true, "allow address"}},
		{"raw ip denied", denyAll, Query{Dst: a("203.0.113.8")}, Verdict{false, "deny"}},
		{"any name with a raw ip", denyAll, Query{Dst: a("203.0.113.7"), Name: "evil.test"}, Verdict{true, "allow address"}},
		{"ipv6", open, Query{Dst: a("2001:db8::1")}, Verdict{false, "IPv6 is never routed for a policed sandbox"}},
		{"mapped ipv4", denyAll, Query{Dst: a("::ffff:203.0.113.7")}, Verdict{true, "allow address"}},
		{"deny cidr", blockSome, Query{Dst: a("203.0.113.9")}, Verdict{false, "deny"}},
		{"deny cidr, allowed name resolving there", blockSome, Query{Dst: a("203.0.113.9"), Name: "ok.example.test", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"outside deny cidr", blockSome, Query{Dst: a("198.51.100.1")}, Verdict{true, "default"}},
		{"open", open, Query{Dst: a("198.51.100.1")}, Verdict{true, "default"}},
		{"star names anything that resolves", star, Query{Dst: a("192.0.2.1"), Name: "x.test", NameResolvesToDst: true}, Verdict{true, "allow domain"}},
		{"star, raw ip", star, Query{Dst: a("192.0.2.1")}, Verdict{false, "deny"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Decide(tc.q)); diff != "" {
				t.Errorf("Decide(%+v) (-want +got):\n%s", tc.q, diff)
			}
		})
	}
}

func TestResolvableAndAddressDecides(t *testing.T) {
	denyAll, err := Parse(`{"allow":["pypi.org","*.example.test","203.0.113.7"],"deny":["0.0.0.0/0"]}`)
	if err != nil {
		t.Fatal(err)
	}
	ipOnly, err := Parse(`{"allow":["203.0.113.7"],"deny":["0.0.0.0/0"]}`)
	if err != nil {
		t.Fatal(err)
	}
	open, err := Parse(`{"deny":["198.51.100.0/24"]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    *Policy
		name string
		want bool
	}{
		{denyAll, "pypi.org", true}, {denyAll, "a.example.test", true}, {denyAll, "example.test", false},
		{denyAll, "exfil-data.attacker.test", false}, {ipOnly, "pypi.org", false}, {open, "anything.test", true},
	} {
		if got := tc.p.Resolvable(tc.name); got != tc.want {
			t.Errorf("Resolvable(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		p    *Policy
		dst  netip.Addr
		want bool
	}{
		{denyAll, a("203.0.113.7"), true}, {denyAll, a("192.0.2.1"), false},
		{ipOnly, a("192.0.2.1"), true}, {open, a("198.51.100.1"), true},
	} {
		if got := tc.p.AddressDecides(tc.dst); got != tc.want {
			t.Errorf("AddressDecides(%s) = %v, want %v", tc.dst, got, tc.want)
		}
	}
}

func TestInjectPrefersExactThenLongestWildcard(t *testing.T) {
	rule := func(domain, header string) egress.InjectRule {
		return egress.InjectRule{Domain: domain, Headers: []egress.Header{{Name: header, SecretKeyRef: egress.SecretKeyRef{Name: "s", Key: "k"}}}}
	}
	p, err := Compile(egress.Policy{Inject: []egress.InjectRule{
		rule("*.example.test", "Short"), rule("*.api.example.test", "Long"), rule("v1.api.example.test", "Exact"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"v1.api.example.test": "Exact", "V1.API.example.test.": "Exact", "v2.api.example.test": "Long",
		"x.v2.api.example.test": "Long", "api.example.test": "Short", "www.example.test": "Short",
		"example.test": "", "other.test": "", "": "",
	} {
		r, ok := p.Inject(name)
		got := ""
		if ok {
			got = r.Headers[0].Name
		}
		if got != want {
			t.Errorf("Inject(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestEffectiveClaimReplacesTemplate(t *testing.T) {
	tpl := map[string]string{egress.PolicyAnnotation: `{"deny":["0.0.0.0/0"]}`}
	claim := map[string]string{egress.PolicyAnnotation: `{}`}
	if got, ok := Effective(tpl, claim); !ok || got != `{}` {
		t.Errorf("claim override: got %q %v", got, ok)
	}
	if got, ok := Effective(tpl, nil); !ok || got != tpl[egress.PolicyAnnotation] {
		t.Errorf("template: got %q %v", got, ok)
	}
	if _, ok := Effective(nil, map[string]string{"x": "y"}); ok {
		t.Error("no policy anywhere: got one")
	}
}

func TestAlwaysDeny(t *testing.T) {
	r, err := AlwaysDeny([]string{"198.18.0.0/24", "198.18.1.5"})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"127.0.0.1": true, "10.2.3.4": true, "169.254.169.254": true, "198.18.0.9": true, "198.18.1.5": true,
		"198.18.1.6": false, "0.0.0.0": true, "224.0.0.251": true, "100.64.0.1": true, "203.0.113.7": false,
		"::ffff:127.0.0.1": true, "fe80::1": true,
	} {
		if got := r.Contains(netip.MustParseAddr(s)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", s, got, want)
		}
	}
	if _, err := AlwaysDeny([]string{"nope"}); err == nil {
		t.Error("a bad cluster range was accepted")
	}
}
