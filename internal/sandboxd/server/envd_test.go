package server

import (
	"context"
	"net"
	"net/http"
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

func TestEnvdAccessTokenOverridesTheSandboxToken(t *testing.T) {
	url := serveEnvd(t, func(c *Config) { c.Token, c.EnvdAccessToken = "sandbox-token", "e2b-token" })
	fs := filesystempbconnect.NewFilesystemClient(http.DefaultClient, url, connect.WithProtoJSON())
	for token, accepted := range map[string]bool{"e2b-token": true, "sandbox-token": false, "": false} {
		req := connect.NewRequest(&fspb.StatRequest{Path: "."})
		req.Header().Set(envd.AccessTokenHeader, token)
		_, err := fs.Stat(context.Background(), req)
		if accepted && err != nil || !accepted && connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("token %q: %v, want accepted=%v", token, err, accepted)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
