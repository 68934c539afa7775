package authz_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/portforward"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/headers"
)

// refuseAll stands for the configured authorizer: it refuses as TokenReview does without a token.
type refuseAll struct{ calls int }

func (r *refuseAll) Authorize(context.Context, *http.Request, headers.Target) error {
	r.calls++
	return authz.ErrUnauthenticated
}

// request is a request accepted on 127.0.0.1:8080 from peer.
func request(peer string, header http.Header) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://router/", nil)
	r.Header = header
	r.RemoteAddr = peer
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey,
		net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:8080"))))
}

// TestPortForwardAdmitsOnlyTheRuntimesTokenlessConnections: the runtime's socket without a
// credential passes without asking Next; with a credential Next decides (a client that sends a
// token gets the answer its token earns); any other peer goes to Next, and a local one is told
// why it did not pass.
func TestPortForwardAdmitsOnlyTheRuntimesTokenlessConnections(t *testing.T) {
	dir := t.TempDir()
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		// 127.0.0.1:40000 (root) and 127.0.0.1:40001 (uid 1000), both to 127.0.0.1:8080.
		"   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 11 1\n" +
		"   1: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 12 1\n"
	if err := os.WriteFile(filepath.Join(dir, "tcp"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	noAddrs := func() ([]netip.Addr, error) { return nil, nil }
	cases := []struct {
		name       string
		peer       string
		header     http.Header
		wantErr    bool
		wantNext   int
		wantReason string
	}{
		{name: "the runtime's socket, no credential", peer: "127.0.0.1:40000", wantNext: 0},
		{name: "the runtime's socket with a token", peer: "127.0.0.1:40000", header: http.Header{"Authorization": {"Bearer x"}}, wantErr: true, wantNext: 1},
		{name: "another user's socket on loopback", peer: "127.0.0.1:40001", wantErr: true, wantNext: 1, wantReason: "belongs to uid 1000"},
		{name: "a remote peer", peer: "198.18.0.7:40000", wantErr: true, wantNext: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next := &refuseAll{}
			a := &authz.PortForward{Next: next, Recognizer: portforward.Recognizer{ProcNet: dir, LocalAddrs: noAddrs}}
			header := tc.header
			if header == nil {
				header = http.Header{}
			}
			err := a.Authorize(context.Background(), request(tc.peer, header), headers.Target{Namespace: "ns", Name: "sb"})
			if (err != nil) != tc.wantErr || next.calls != tc.wantNext {
				t.Fatalf("err %v, Next called %d times; want error %v, %d calls", err, next.calls, tc.wantErr, tc.wantNext)
			}
			if err != nil && !errors.Is(err, authz.ErrUnauthenticated) {
				t.Errorf("%v does not wrap ErrUnauthenticated", err)
			}
			if tc.wantReason != "" && !strings.Contains(err.Error(), tc.wantReason) {
				t.Errorf("%v does not say %q", err, tc.wantReason)
			}
		})
	}
}
