package scopedtoken

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	keyA = strings.Repeat("a", 32)
	keyB = strings.Repeat("b", 40)
	t0   = time.Unix(1_800_000_000, 0)
)

func mustKeys(t *testing.T, data string) Keys {
	t.Helper()
	ks, err := ParseKeys([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestParseKeys(t *testing.T) {
	cases := []struct {
		name, data, wantErr string
		want                int
	}{
		{name: "one key", data: keyA + "\n", want: 1},
		{name: "rotation with comments", data: "# new\n" + keyB + "\n\n# old\n  " + keyA + "  \n", want: 2},
		{name: "short key", data: keyA + "\nshort\n", wantErr: "line 2 is 5 bytes"},
		{name: "empty", data: "\n# nothing\n", wantErr: "holds no key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := ParseKeys([]byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ks.keys) != tc.want {
				t.Errorf("got %d keys, want %d", len(ks.keys), tc.want)
			}
		})
	}
}

func TestMintVerify(t *testing.T) {
	signer := mustKeys(t, keyA)
	tok, err := signer.Mint("team", "sb-1", 90*time.Second+500*time.Millisecond, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "v1.") {
		t.Fatalf("token %q lacks the v1 prefix", tok)
	}
	want := Claims{Namespace: "team", Name: "sb-1", Expiry: t0.Unix() + 90}
	tamperedPayload := func() string {
		parts := strings.Split(tok, ".")
		other := base64.RawURLEncoding.EncodeToString([]byte(`{"ns":"team","name":"sb-2","exp":1900000000}`))
		return parts[0] + "." + other + "." + parts[2]
	}()
	cases := []struct {
		name    string
		keys    Keys
		token   string
		now     time.Time
		want    Claims
		wantErr error
	}{
		{name: "valid", keys: signer, token: tok, now: t0, want: want},
		{name: "valid with old key still listed", keys: mustKeys(t, keyB+"\n"+keyA), token: tok, now: t0, want: want},
		{name: "last second", keys: signer, token: tok, now: t0.Add(89 * time.Second), want: want},
		{name: "expired at exp", keys: signer, token: tok, now: t0.Add(90 * time.Second), wantErr: ErrExpired},
		{name: "other key", keys: mustKeys(t, keyB), token: tok, now: t0, wantErr: ErrSignature},
		{name: "payload swapped", keys: signer, token: tamperedPayload, now: t0, wantErr: ErrSignature},
		{name: "wrong version", keys: signer, token: "v2" + tok[2:], now: t0, wantErr: ErrMalformed},
		{name: "two parts", keys: signer, token: "v1.abc", now: t0, wantErr: ErrMalformed},
		{name: "bad base64 signature", keys: signer, token: tok + "!", now: t0, wantErr: ErrMalformed},
		{name: "empty", keys: signer, token: "", now: t0, wantErr: ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.keys.Verify(tc.token, tc.now)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMintRefusesBadInput(t *testing.T) {
	ks := mustKeys(t, keyA)
	for _, tc := range []struct {
		ns, name string
		ttl      time.Duration
		wantErr  string
	}{
		{ns: "a", name: "b", ttl: 999 * time.Millisecond, wantErr: "below the minimum"},
		{ns: "", name: "b", ttl: time.Minute, wantErr: "needs a namespace and a name"},
	} {
		if _, err := ks.Mint(tc.ns, tc.name, tc.ttl, t0); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Mint(%q, %q, %s) error = %v, want %q", tc.ns, tc.name, tc.ttl, err, tc.wantErr)
		}
	}
	if _, err := (Keys{}).Mint("a", "b", time.Minute, t0); err == nil {
		t.Error("Mint without keys succeeded")
	}
}
