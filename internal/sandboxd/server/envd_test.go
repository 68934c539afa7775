package server

import (
	"context"
	"net"
	"net/http"
	neturl "net/url"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/paddock-dev/paddock/api/proto/envd/filesystem"
	"github.com/paddock-dev/paddock/api/proto/envd/filesystem/filesystempbconnect"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
)

// serveEnvd serves only the envd listener of a daemon configured by mutate.
func serveEnvd(t *testing.T, mutate func(*Config)) string {
	t.Helper()
	cfg := Config{RootDir: t.TempDir(), ShutdownTimeout: 5 * time.Second}
	mutate(&cfg)
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, Listeners{Envd: l}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// TestEnvdListenerSpeaksH2CAndHTTP1 calls the envd port over plain HTTP/1.1 and over h2c (HTTP/2
// without TLS, prior knowledge), with the sandbox token as X-Access-Token.
func TestEnvdListenerSpeaksH2CAndHTTP1(t *testing.T) {
	url := serveEnvd(t, func(c *Config) { c.Token = "sandbox-token" })
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	for name, rt := range map[string]http.RoundTripper{"HTTP/1.1": http.DefaultTransport, "HTTP/2.0": h2c} {
		var proto string
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil {
				proto = resp.Proto
			}
			return resp, err
		})}
		fs := filesystempbconnect.NewFilesystemClient(client, url, connect.WithProtoJSON())
		req := connect.NewRequest(&fspb.ListDirRequest{Path: "/home/user"})
		req.Header().Set(envd.AccessTokenHeader, "sandbox-token")
		if _, err := fs.ListDir(context.Background(), req); err != nil || proto != name {
			t.Errorf("%s: ListDir = %v over %q", name, err, proto)
		}
	}
}

// TestEnvdAccessToken: --envd-access-token is accepted besides the sandbox token.
func TestEnvdAccessToken(t *testing.T) {
	url := serveEnvd(t, func(c *Config) { c.Token, c.EnvdAccessToken = "sandbox-token", "e2b-token" })
	fs := filesystempbconnect.NewFilesystemClient(http.DefaultClient, url, connect.WithProtoJSON())
	for token, accepted := range map[string]bool{"e2b-token": true, "sandbox-token": true, "other": false, "": false} {
		req := connect.NewRequest(&fspb.StatRequest{Path: "."})
		req.Header().Set(envd.AccessTokenHeader, token)
		_, err := fs.Stat(context.Background(), req)
		if accepted && err != nil || !accepted && connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("token %q: %v, want accepted=%v", token, err, accepted)
		}
	}
}

// TestEnvdRefusesALockedMember: an unclaimed warm member answers only the control token on the
// envd port too, signed URLs included.
func TestEnvdRefusesALockedMember(t *testing.T) {
	url := serveEnvd(t, func(c *Config) {
		c.Token, c.EnvdAccessToken, c.ControlToken, c.RequireClaim = "sandbox-token", "e2b-token", "control-token", true
		c.ClaimHold = time.Millisecond // the sandbox token is held, then refused (claimhold_test.go)
	})
	fs := filesystempbconnect.NewFilesystemClient(http.DefaultClient, url, connect.WithProtoJSON())
	for _, token := range []string{"e2b-token", "sandbox-token"} {
		req := connect.NewRequest(&fspb.StatRequest{Path: "."})
		req.Header().Set(envd.AccessTokenHeader, token)
		if _, err := fs.Stat(context.Background(), req); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("token %q on a locked member: %v, want permission_denied", token, err)
		}
	}
	req := connect.NewRequest(&fspb.StatRequest{Path: "."})
	req.Header().Set(envd.AccessTokenHeader, "control-token")
	if _, err := fs.Stat(context.Background(), req); err != nil {
		t.Errorf("the control token on a locked member: %v", err)
	}
	resp, err := http.Get(url + "/files?path=x&signature=" + neturl.QueryEscape(envd.Signature("x", "read", "", "e2b-token", 0)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a signed URL on a locked member: %d, want 403", resp.StatusCode)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
