package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	processv1 "github.com/paddock-dev/paddock/api/proto/process/v1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/portforward"
	"github.com/paddock-dev/paddock/test/framework"
)

// sandboxUser is the uid of code in a sandbox (the templates' runAsUser); root is the container
// runtime's, whose socket is the port-forward's.
const (
	sandboxUser = 1000
	root        = 0
)

// tokenless makes upstream's calls without a credential over connections whose sockets belong
// to uid: REST and legacy over HTTP, Execute over gRPC. It answers an error per call (nil when
// served).
func tokenless(t *testing.T, td *testDaemon, uid int) map[string]error {
	t.Helper()
	dial := func(addr string) net.Conn { return framework.DialAsUID(t, uid, addr) }
	out := map[string]error{}
	httpCall := func(name, method, url, body string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dial(addr), nil }}}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out[name] = nil
		if resp.StatusCode >= 300 {
			out[name] = &AuthError{Status: resp.StatusCode, Message: string(b)}
		}
	}
	httpCall("REST GET /v1/files", http.MethodGet, td.rest+"/v1/files/", "")
	httpCall("legacy POST /execute", http.MethodPost, td.legacy+"/execute", `{"command":"true"}`)
	conn, err := grpc.NewClient(td.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(_ context.Context, addr string) (net.Conn, error) { return dial(addr), nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = processv1.NewProcessServiceClient(conn).Execute(framework.Context(t, 30*time.Second), &processv1.ExecuteRequest{Config: cfgOf("true")})
	out["gRPC Execute"] = err
	return out
}

// httpStatus is the HTTP status an error of tokenless stands for (gRPC codes mapped).
func httpStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case status.Code(err) == codes.Unauthenticated:
		return http.StatusUnauthorized
	case status.Code(err) == codes.PermissionDenied:
		return http.StatusForbidden
	}
	if ae, ok := err.(*AuthError); ok {
		return ae.Status
	}
	return 0
}

// TestPortForwardStandsForTheSandboxToken is upstream's sandboxd pod tunnel on a real daemon:
// a call without a credential from the port-forward's socket (root, on loopback) is served on
// every API, as the sandbox token would be; the same call from code in the sandbox (another uid
// on the same loopback) gets 401 saying why; a locked warm member stays locked to the
// port-forward, claim settings stay the control token's, and without the flag nothing changes.
func TestPortForwardStandsForTheSandboxToken(t *testing.T) {
	open := startDaemon(t, func(c *Config) {
		c.Token, c.ControlToken, c.AcceptPortForward = "sandbox-token", "control-token", true
	})
	for name, err := range tokenless(t, open, root) {
		if err != nil {
			t.Errorf("%s through the port-forward: %v, want served", name, err)
		}
	}
	for name, err := range tokenless(t, open, sandboxUser) {
		if httpStatus(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), fmt.Sprintf("belongs to uid %d", sandboxUser)) {
			t.Errorf("%s from uid %d on loopback: %v, want 401 saying the socket is not the runtime's", name, sandboxUser, err)
		}
	}
	// Claim settings are the controller's alone, whoever forwards.
	settings := `{"claimName":"c","claimUID":"u"}`
	req, _ := http.NewRequest(http.MethodPut, open.rest+sandboxd.ClaimSettingsPath, strings.NewReader(settings))
	conn := framework.DialAsUID(t, root, strings.TrimPrefix(open.rest, "http://"))
	resp, err := (&http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("claim settings through the port-forward: %d, want 401", resp.StatusCode)
	}

	locked := startDaemon(t, func(c *Config) {
		c.Token, c.ControlToken, c.RequireClaim, c.AcceptPortForward = "sandbox-token", "control-token", true, true
	})
	for name, err := range tokenless(t, locked, root) {
		if httpStatus(err) != http.StatusForbidden || !strings.Contains(err.Error(), "not claimed yet") {
			t.Errorf("%s through the port-forward to a locked member: %v, want 403 not claimed yet", name, err)
		}
	}

	off := startDaemon(t, func(c *Config) { c.Token = "sandbox-token" })
	for name, err := range tokenless(t, off, root) {
		if httpStatus(err) != http.StatusUnauthorized {
			t.Errorf("%s without --accept-port-forward: %v, want 401", name, err)
		}
	}
}

// TestTokenlessPeers decides every kind of tokenless peer under each setting: the port-forward
// stands for the sandbox token with AcceptPortForward, a peer from the network with
// AllowUnauthenticatedNetwork, a local peer that is not the port-forward never, and a locked
// member answers none of them.
func TestTokenlessPeers(t *testing.T) {
	peers := map[string]portforward.Peer{
		"port-forward":         {Local: true, PortForward: true},
		"code in the sandbox":  {Local: true, Reason: "the peer socket belongs to uid 1000"},
		"pod network":          {Remote: true},
		"not a TCP connection": {Reason: "not a TCP connection"},
	}
	cases := []struct {
		name    string
		pf, net bool
		locked  bool
		served  []string
	}{
		{name: "neither"},
		{name: "port-forward", pf: true, served: []string{"port-forward"}},
		{name: "network", net: true, served: []string{"pod network"}},
		{name: "both", pf: true, net: true, served: []string{"port-forward", "pod network"}},
		{name: "both, locked", pf: true, net: true, locked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(Config{RootDir: t.TempDir(), Token: "sandbox-token", ControlToken: "control-token",
				RequireClaim: tc.locked, AcceptPortForward: tc.pf, AllowUnauthenticatedNetwork: tc.net})
			if err != nil {
				t.Fatal(err)
			}
			for name, p := range peers {
				err := d.authorizePeer(nil, func() portforward.Peer { return p })
				want := false
				for _, s := range tc.served {
					want = want || s == name
				}
				if (err == nil) != want {
					t.Errorf("%s: %v, want served %v", name, err, want)
				}
				if err := d.authorizePeer([]string{"wrong"}, func() portforward.Peer { return p }); err == nil {
					t.Errorf("%s with a wrong token: served; a credential that is sent must be right", name)
				}
			}
		})
	}
}
