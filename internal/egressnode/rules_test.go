package egressnode

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRender(t *testing.T) {
	a := netip.MustParseAddr
	got := Render([]netip.Addr{a("198.18.0.9"), a("198.18.0.7"), a("fd00::7"), a("198.18.0.9")}, Ports{Proxy: 15001, DNS: 15053})
	want := `*nat
:PADDOCK-EGRESS - [0:0]
-A PADDOCK-EGRESS -s 198.18.0.7/32 -p udp --dport 53 -j REDIRECT --to-ports 15053
-A PADDOCK-EGRESS -s 198.18.0.7/32 -p tcp --dport 53 -j REDIRECT --to-ports 15053
-A PADDOCK-EGRESS -s 198.18.0.7/32 -p tcp -j REDIRECT --to-ports 15001
-A PADDOCK-EGRESS -s 198.18.0.9/32 -p udp --dport 53 -j REDIRECT --to-ports 15053
-A PADDOCK-EGRESS -s 198.18.0.9/32 -p tcp --dport 53 -j REDIRECT --to-ports 15053
-A PADDOCK-EGRESS -s 198.18.0.9/32 -p tcp -j REDIRECT --to-ports 15001
COMMIT
*mangle
:PADDOCK-EGRESS-IN - [0:0]
:PADDOCK-EGRESS-FWD - [0:0]
-A PADDOCK-EGRESS-IN -s 198.18.0.7/32 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.7/32 -p tcp --dport 15001 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.7/32 -p udp --dport 15053 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.7/32 -p tcp --dport 15053 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.7/32 -j DROP
-A PADDOCK-EGRESS-FWD -s 198.18.0.7/32 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-FWD -s 198.18.0.7/32 -j DROP
-A PADDOCK-EGRESS-IN -s 198.18.0.9/32 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.9/32 -p tcp --dport 15001 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.9/32 -p udp --dport 15053 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.9/32 -p tcp --dport 15053 -j ACCEPT
-A PADDOCK-EGRESS-IN -s 198.18.0.9/32 -j DROP
-A PADDOCK-EGRESS-FWD -s 198.18.0.9/32 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-FWD -s 198.18.0.9/32 -j DROP
COMMIT
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
	want6 := `*mangle
:PADDOCK-EGRESS-IN - [0:0]
:PADDOCK-EGRESS-FWD - [0:0]
-A PADDOCK-EGRESS-IN -s fd00::7/128 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-IN -s fd00::7/128 -j DROP
-A PADDOCK-EGRESS-FWD -s fd00::7/128 -m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY -j ACCEPT
-A PADDOCK-EGRESS-FWD -s fd00::7/128 -j DROP
COMMIT
`
	if diff := cmp.Diff(want6, Render6([]netip.Addr{a("198.18.0.7"), a("fd00::7")})); diff != "" {
		t.Errorf("Render6 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("*nat\n:PADDOCK-EGRESS - [0:0]\nCOMMIT\n*mangle\n:PADDOCK-EGRESS-IN - [0:0]\n:PADDOCK-EGRESS-FWD - [0:0]\nCOMMIT\n", Render(nil, Ports{1, 2})); diff != "" {
		t.Errorf("Render of no Pods must empty the chains (-want +got):\n%s", diff)
	}
}
