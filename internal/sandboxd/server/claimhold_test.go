package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/util/wait"

	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
)

// lockedMember serves a locked warm member's envd and REST listeners (claim settings) with hold
// as its ClaimHold; it returns the daemon, the envd process client and the REST URL.
func lockedMember(t *testing.T, hold time.Duration) (*Daemon, processpbconnect.ProcessClient, string) {
	t.Helper()
	d, err := New(Config{RootDir: t.TempDir(), ShutdownTimeout: 5 * time.Second, Token: "sandbox-token", EnvdAccessToken: "e2b-token",
		ControlToken: "control-token", RequireClaim: true, ClaimHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ls := Listeners{Envd: listen(), REST: listen()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return d, processpbconnect.NewProcessClient(http.DefaultClient, "http://"+ls.Envd.Addr().String(), connect.WithProtoJSON()),
		"http://" + ls.REST.Addr().String()
}

// list is the E2B front door's daemon probe (Process/List) with token.
func list(ctx context.Context, c processpbconnect.ProcessClient, token string) error {
	req := connect.NewRequest(&pb.ListRequest{})
	req.Header().Set(envd.AccessTokenHeader, token)
	_, err := c.List(ctx, req)
	return err
}

// TestLockedMemberHoldsTheSandboxTokenUntilClaimed: a probe with the sandbox token that reaches a
// warm member before its claim settings is answered, in that one call, once they land; it is not
// refused and sent again.
func TestLockedMemberHoldsTheSandboxTokenUntilClaimed(t *testing.T) {
	d, c, rest := lockedMember(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	probed := make(chan error, 1)
	go func() { probed <- list(ctx, c, "e2b-token") }()
	if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return d.holding.Load() == 1, nil
	}); err != nil {
		t.Fatalf("the probe was never held: %v (%v)", err, drained(probed))
	}

	body, _ := json.Marshal(claim.Settings{ClaimName: "c", ClaimUID: "uid-c"})
	req, _ := http.NewRequest(http.MethodPut, rest+sandboxd.ClaimSettingsPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer control-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("claim settings answered %d", resp.StatusCode)
	}
	if err := <-probed; err != nil {
		t.Errorf("the held probe: %v, want it served once the member was claimed", err)
	}
	if n := d.holding.Load(); n != 0 {
		t.Errorf("%d calls still held after the claim", n)
	}
}

// drained is what ch holds now, if anything.
func drained(ch <-chan error) any {
	select {
	case err := <-ch:
		return err
	default:
		return "no answer yet"
	}
}

// TestLockedMemberRefusesWhatItDoesNotHold: while a member is locked, calls without the sandbox
// token are refused at once (a held call would outlast the hour-long hold and the test's
// deadline), and a call with it is refused after the hold when no claim comes.
func TestLockedMemberRefusesWhatItDoesNotHold(t *testing.T) {
	d, c, _ := lockedMember(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, token := range []string{"", "wrong"} {
		if err := list(ctx, c, token); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("token %q on a locked member: %v, want permission_denied at once", token, err)
		}
	}
	if err := list(ctx, c, "control-token"); err != nil {
		t.Errorf("the control token on a locked member: %v", err)
	}
	if n := d.holding.Load(); n != 0 {
		t.Errorf("%d calls held", n)
	}

	_, short, _ := lockedMember(t, time.Millisecond)
	if err := list(ctx, short, "sandbox-token"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("the sandbox token on a member never claimed: %v, want permission_denied after the hold", err)
	}
	_, none, _ := lockedMember(t, -1)
	if err := list(ctx, none, "sandbox-token"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("the sandbox token with no hold: %v, want permission_denied", err)
	}
}
