package egress

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDeny(t *testing.T) {
	defaults4 := []string{"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"}
	defaults6 := []string{"fc00::/7", "fe80::/10"}
	tests := []struct {
		name       string
		explicit   []string
		discovered Discovered
		want4      []string
		want6      []string
	}{
		{name: "nothing discovered keeps the defaults", want4: defaults4, want6: defaults6},
		{
			name: "discovered ranges outside the defaults are added, hosts as /32 and /128",
			discovered: Discovered{
				PodCIDRs:     []string{"198.18.1.0/24", "2001:db8:1::/64"},
				NodeIPs:      []string{"198.18.0.5", "2001:db8::5"},
				ServiceCIDRs: []string{"100.64.0.0/16"},
				APIServerIPs: []string{"203.0.113.7"},
			},
			want4: []string{"10.0.0.0/8", "100.64.0.0/16", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "198.18.0.5/32", "198.18.1.0/24", "203.0.113.7/32"},
			want6: []string{"2001:db8::5/128", "2001:db8:1::/64", "fc00::/7", "fe80::/10"},
		},
		{
			name:       "ranges inside others collapse, unmasked CIDRs are masked",
			discovered: Discovered{PodCIDRs: []string{"10.244.1.0/24", "198.18.1.7/24"}, NodeIPs: []string{"198.18.1.9", "192.168.1.1"}},
			want4:      []string{"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "198.18.1.0/24"},
			want6:      defaults6,
		},
		{
			name:       "an explicit list replaces discovery",
			explicit:   []string{"198.19.0.0/16"},
			discovered: Discovered{PodCIDRs: []string{"198.18.1.0/24"}},
			want4:      []string{"10.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "198.19.0.0/16"},
			want6:      defaults6,
		},
		{
			name:       "unparsable discovered entries are skipped",
			discovered: Discovered{NodeIPs: []string{"not-an-ip", ""}},
			want4:      defaults4, want6: defaults6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v4, v6, err := Deny(tt.explicit, tt.discovered)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want4, v4); diff != "" {
				t.Errorf("IPv4 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want6, v6); diff != "" {
				t.Errorf("IPv6 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDenyRejectsBadExplicitEntries(t *testing.T) {
	if _, _, err := Deny([]string{"198.18.0.0/33"}, Discovered{}); err == nil {
		t.Error("Deny accepted 198.18.0.0/33")
	}
	if err := Validate([]string{"198.18.0.0/15", "fd00::1"}); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestRedirectAddresses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		podCIDRs []string
		want     []string
	}{
		{"none", nil, nil},
		{"one node", []string{"198.18.0.0/24"}, []string{"198.18.0.1/32"}},
		{"unmasked, sorted, deduplicated", []string{"198.18.1.0/24", "198.18.0.7/24", "198.18.0.0/24"}, []string{"198.18.0.1/32", "198.18.1.1/32"}},
		{"IPv6, too small and unparsable give none", []string{"fd00:1::/64", "198.18.2.4/31", "198.18.2.8/32", "pods"}, nil},
		{"dual stack keeps the IPv4 gateway", []string{"198.19.0.0/25", "fd00:2::/64"}, []string{"198.19.0.1/32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RedirectAddresses(tc.podCIDRs)); diff != "" {
				t.Errorf("RedirectAddresses(%v) (-want +got):\n%s", tc.podCIDRs, diff)
			}
		})
	}
}
