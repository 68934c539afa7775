package envd

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSignature checks the formula against digests computed with openssl:
// printf 'dir/a.txt:read:user:tok' | openssl dgst -sha256 -binary | base64
func TestSignature(t *testing.T) {
	cases := []struct {
		path, op, user, token string
		expires               int64
		want                  string
	}{
		{"dir/a.txt", "read", "user", "tok", 0, "v1_qz1gOJkmwjjnjqMs/ETq1zZghvU5jTYVkMJRMCjjcwg"},
		{"/home/user/x", "write", "", "tok", 1700000000, "v1_mPGk/tMW3+wfDnMuOM2Ow5aSLKX8Qkm5QzMOGhciups"},
	}
	for _, tc := range cases {
		if got := Signature(tc.path, tc.op, tc.user, tc.token, tc.expires); got != tc.want {
			t.Errorf("Signature(%q, %q, %q, %q, %d) = %q, want %q", tc.path, tc.op, tc.user, tc.token, tc.expires, got, tc.want)
		}
	}
}

func get(t *testing.T, u string, header ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestFilesAuthorization(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root.Dir(), "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour).Unix()
	past := time.Now().Add(-time.Hour).Unix()
	signed := func(path, op, user string, expires int64) string {
		q := url.Values{"path": {path}, "signature": {Signature(path, op, user, testToken, expires)}}
		if user != "" {
			q.Set("username", user)
		}
		if expires != 0 {
			q.Set("signature_expiration", strconv.FormatInt(expires, 10))
		}
		return f.url + "/files?" + q.Encode()
	}
	cases := []struct {
		name   string
		url    string
		header []string
		want   int
	}{
		{"token header", f.url + "/files?path=a.txt", []string{AccessTokenHeader, testToken}, 200},
		{"bearer", f.url + "/files?path=a.txt", []string{"Authorization", "Bearer " + testToken}, 200},
		{"no credential", f.url + "/files?path=a.txt", nil, 401},
		{"wrong token", f.url + "/files?path=a.txt", []string{AccessTokenHeader, "nope"}, 401},
		{"signed", signed("a.txt", "read", "", 0), nil, 200},
		{"signed for a user", signed("a.txt", "read", "user", future), nil, 200},
		{"signed, expired", signed("a.txt", "read", "", past), nil, 401},
		{"signed for writing", signed("a.txt", "write", "", 0), nil, 401},
		{"signed for another user", f.url + "/files?path=a.txt&username=user&signature=" + url.QueryEscape(Signature("a.txt", "read", "root", testToken, 0)), nil, 401},
		{"signed with another token", f.url + "/files?path=a.txt&signature=" + url.QueryEscape(Signature("a.txt", "read", "", "other", 0)), nil, 401},
		{"signature, expiry removed", signed("a.txt", "read", "", future)[:len(signed("a.txt", "read", "", future))-len("&signature_expiration=")-10], nil, 401},
		{"unknown user", f.url + "/files?path=a.txt&username=mallory", []string{AccessTokenHeader, testToken}, 401},
		{"health is open", f.url + "/health", nil, 204},
	}
	for _, tc := range cases {
		if got := get(t, tc.url, tc.header...); got != tc.want {
			t.Errorf("%s: GET %s = %d, want %d", tc.name, tc.url, got, tc.want)
		}
	}
}
