package headers

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		h       http.Header
		policy  Policy
		want    Target
		wantErr string
	}{
		{name: "defaults", h: hdr("X-Sandbox-ID", "sb-1"),
			want: Target{Name: "sb-1", Namespace: "default", Port: 8888}},
		{name: "non-canonical map key is not read", h: http.Header{
			"x-sandbox-id": nil}, wantErr: MsgIDRequired},
		{name: "every field", h: hdr("x-sandbox-id", "a", "x-sandbox-namespace", "team-1", "x-sandbox-port", "9090",
			"x-sandbox-pod-ip", "198.18.0.7", "x-sandbox-uid", "u-1", "x-sandbox-timeout", "1.5"),
			want: Target{Name: "a", Namespace: "team-1", Port: 9090, PodIP: netip.MustParseAddr("198.18.0.7"),
				UID: "u-1", Timeout: 1500 * time.Millisecond}},
		{name: "missing id", h: hdr("X-Sandbox-Namespace", "x"), wantErr: MsgIDRequired},
		{name: "blank id", h: hdr("X-Sandbox-ID", "  "), wantErr: MsgIDRequired},
		{name: "upper-case id", h: hdr("X-Sandbox-ID", "Sb"), wantErr: MsgInvalidID},
		{name: "id with dot", h: hdr("X-Sandbox-ID", "a.b"), wantErr: MsgInvalidID},
		{name: "id too long", h: hdr("X-Sandbox-ID", strings.Repeat("a", 64)), wantErr: MsgInvalidID},
		{name: "id 63 chars", h: hdr("X-Sandbox-ID", strings.Repeat("a", 63)),
			want: Target{Name: strings.Repeat("a", 63), Namespace: "default", Port: 8888}},
		{name: "id checked before namespace", h: hdr("X-Sandbox-ID", "-a", "X-Sandbox-Namespace", "-b"), wantErr: MsgInvalidID},
		{name: "bad namespace", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Namespace", "ns_1"), wantErr: MsgInvalidNamespace},
		{name: "namespace before port", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Namespace", "N", "X-Sandbox-Port", "0"), wantErr: MsgInvalidNamespace},
		{name: "port zero", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Port", "0"), wantErr: MsgInvalidPort},
		{name: "port too big", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Port", "65536"), wantErr: MsgInvalidPort},
		{name: "port not a number", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Port", "http"), wantErr: MsgInvalidPort},
		{name: "port max", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Port", "65535"),
			want: Target{Name: "a", Namespace: "default", Port: 65535}},
		{name: "port before pod ip", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Port", "-1", "X-Sandbox-Pod-IP", "x"), wantErr: MsgInvalidPort},
		{name: "pod ip garbage", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "not-an-ip"), wantErr: MsgInvalidPodIP},
		{name: "pod ip hostname", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "metadata.google.internal"), wantErr: MsgInvalidPodIP},
		{name: "cloud metadata", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "169.254.169.254"), wantErr: MsgInvalidPodIP},
		{name: "ipv6 link-local", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "fe80::1"), wantErr: MsgInvalidPodIP},
		{name: "ipv6 zone", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "fd00::1%eth0"), wantErr: MsgInvalidPodIP},
		{name: "unspecified v4", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "0.0.0.0"), wantErr: MsgInvalidPodIP},
		{name: "unspecified v6", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "::"), wantErr: MsgInvalidPodIP},
		{name: "multicast", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "224.0.0.1"), wantErr: MsgInvalidPodIP},
		{name: "multicast v6", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "ff02::1"), wantErr: MsgInvalidPodIP},
		{name: "loopback refused", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "127.0.0.1"), wantErr: MsgInvalidPodIP},
		{name: "loopback v6 refused", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "::1"), wantErr: MsgInvalidPodIP},
		{name: "v4-mapped loopback refused", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "::ffff:127.0.0.1"), wantErr: MsgInvalidPodIP},
		{name: "v4-mapped metadata refused", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "::ffff:169.254.169.254"), wantErr: MsgInvalidPodIP},
		{name: "loopback allowed by policy", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "127.0.0.1"),
			policy: Policy{AllowLoopback: true},
			want:   Target{Name: "a", Namespace: "default", Port: 8888, PodIP: netip.MustParseAddr("127.0.0.1")}},
		{name: "policy does not allow metadata", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "169.254.169.254"),
			policy: Policy{AllowLoopback: true}, wantErr: MsgInvalidPodIP},
		{name: "ipv6 pod ip", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "2001:2::5"),
			want: Target{Name: "a", Namespace: "default", Port: 8888, PodIP: netip.MustParseAddr("2001:2::5")}},
		{name: "v4-mapped unmapped", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Pod-IP", "::ffff:198.18.0.1"),
			want: Target{Name: "a", Namespace: "default", Port: 8888, PodIP: netip.MustParseAddr("198.18.0.1")}},
		{name: "timeout zero", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "0"), wantErr: MsgInvalidTimeout},
		{name: "timeout negative", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "-3"), wantErr: MsgInvalidTimeout},
		{name: "timeout NaN", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "NaN"), wantErr: MsgInvalidTimeout},
		{name: "timeout Inf", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "+Inf"), wantErr: MsgInvalidTimeout},
		{name: "timeout text", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "soon"), wantErr: MsgInvalidTimeout},
		{name: "timeout integer", h: hdr("X-Sandbox-ID", "a", "X-Sandbox-Timeout", "30"),
			want: Target{Name: "a", Namespace: "default", Port: 8888, Timeout: 30 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.h, tc.policy)
			gotErr := ""
			if err != nil {
				gotErr = err.Detail
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDialable(t *testing.T) {
	cases := []struct {
		ip     string
		policy Policy
		want   bool
	}{
		{ip: "198.18.0.1", want: true},
		{ip: "100.64.0.1", want: true},
		{ip: "fd00::1", want: true},
		{ip: "127.0.0.1", want: false},
		{ip: "127.9.9.9", want: false},
		{ip: "127.0.0.1", policy: Policy{AllowLoopback: true}, want: true},
		{ip: "169.254.169.254", policy: Policy{AllowLoopback: true}, want: false},
		{ip: "fd00:ec2::254", want: true},
		{ip: "fe80::a9fe:a9fe", want: false},
		{ip: "0.0.0.0", want: false},
		{ip: "239.1.1.1", want: false},
		{ip: "ff01::1", want: false},
	}
	for _, tc := range cases {
		if got := Dialable(netip.MustParseAddr(tc.ip), tc.policy); got != tc.want {
			t.Errorf("Dialable(%s, %+v) = %v, want %v", tc.ip, tc.policy, got, tc.want)
		}
	}
}
