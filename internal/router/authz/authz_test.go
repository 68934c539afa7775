package authz

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/scopedtoken"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"Bearer abc", "abc"},
		{"bearer   abc  ", "abc"},
		{"BEARER abc", "abc"},
		{"Basic abc", ""},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"", ""},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if got := BearerToken(r); got != tc.want {
			t.Errorf("BearerToken(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
}

func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: no token", ErrUnauthenticated), http.StatusUnauthorized},
		{fmt.Errorf("%w: other sandbox", ErrForbidden), http.StatusForbidden},
		{errors.New("apiserver down"), http.StatusInternalServerError},
	} {
		if got := StatusFor(tc.err); got != tc.want {
			t.Errorf("StatusFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestScoped(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	keys, err := scopedtoken.ParseKeys([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	otherKeys, _ := scopedtoken.ParseKeys([]byte(strings.Repeat("o", 32)))
	mint := func(ks scopedtoken.Keys, ns, name string, ttl time.Duration) string {
		tok, err := ks.Mint(ns, name, ttl, now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	a := &Scoped{Keys: keys, Now: func() time.Time { return now }}
	target := headers.Target{Name: "sb-a", Namespace: "team"}
	good := mint(keys, "team", "sb-a", time.Minute)
	cases := []struct {
		name    string
		auth    string
		extra   map[string]string
		want    int
		wantMsg string
	}{
		{name: "right sandbox", auth: "Bearer " + good, want: 0},
		{name: "no token", auth: "", want: 401, wantMsg: "send a scoped token"},
		{name: "basic auth", auth: "Basic " + good, want: 401},
		{name: "other sandbox", auth: "Bearer " + mint(keys, "team", "sb-b", time.Minute), want: 403, wantMsg: "scoped to sandbox team/sb-b, not team/sb-a"},
		{name: "other namespace", auth: "Bearer " + mint(keys, "other", "sb-a", time.Minute), want: 403},
		{name: "other key", auth: "Bearer " + mint(otherKeys, "team", "sb-a", time.Minute), want: 401, wantMsg: "signature"},
		{name: "expired", auth: "Bearer " + func() string {
			tok, _ := keys.Mint("team", "sb-a", time.Second, now.Add(-time.Second))
			return tok
		}(), want: 401, wantMsg: "expired"},
		// A pod-IP or UID header only narrows the target: the resolver checks it against the
		// Sandbox named, in every mode.
		{name: "pod ip header is the resolver's to check", auth: "Bearer " + good, extra: map[string]string{headers.SandboxPodIP: "198.18.0.1"}, want: 0},
		{name: "garbage", auth: "Bearer v1.%%%.%%%", want: 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodGet, "/", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			for k, v := range tc.extra {
				r.Header.Set(k, v)
			}
			err := a.Authorize(context.Background(), r, target)
			got := 0
			if err != nil {
				got = StatusFor(err)
			}
			if got != tc.want {
				t.Fatalf("status = %d, want %d (%v)", got, tc.want, err)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}
