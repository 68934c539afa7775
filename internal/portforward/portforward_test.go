package portforward_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/internal/portforward"
	"github.com/paddock-dev/paddock/test/framework"
)

// nobody is the unprivileged uid the tests make sockets as.
const nobody = 65534

func tcp(s string) *net.TCPAddr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

// procNet writes tcp and tcp6 tables with the given lines under a header, as the kernel prints.
func procNet(t *testing.T, tcp4, tcp6 []string) string {
	t.Helper()
	dir := t.TempDir()
	for name, lines := range map[string][]string{"tcp": tcp4, "tcp6": tcp6} {
		body := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" + strings.Join(lines, "\n")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCheckReadsTheKernelTables feeds Check tables in the kernel's format (words of the address
// in little-endian order, as on amd64 and arm64) and checks each way a peer can look.
func TestCheckReadsTheKernelTables(t *testing.T) {
	// 127.0.0.1:40000 -> 127.0.0.1:8080 (0x1F90), and back.
	const (
		peerV4 = "0100007F:9C40"
		oursV4 = "0100007F:1F90"
		// ::1 port 40000 and ::1 port 8080.
		peerV6 = "00000000000000000000000001000000:9C40"
		oursV6 = "00000000000000000000000001000000:1F90"
		// ::ffff:127.0.0.1 port 40000: an IPv6 socket that dialed 127.0.0.1.
		peerMapped = "0000000000000000FFFF00000100007F:9C40"
	)
	line := func(local, remote, state, uid, inode string) string {
		return "   0: " + local + " " + remote + " " + state + " 00000000:00000000 00:00000000 00000000 " + uid + " 0 " + inode + " 1 0000000000000000 20 4 30 10 -1"
	}
	server4 := line(oursV4, peerV4, "01", "65532", "1001")
	cases := []struct {
		name         string
		tcp4, tcp6   []string
		local, peer  string
		locals       []string
		want         portforward.Peer
		reasonSubstr string
	}{
		{name: "root socket from loopback is the port-forward",
			tcp4:  []string{server4, line(peerV4, oursV4, "01", "0", "2002")},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true, PortForward: true}},
		{name: "IPv6 loopback",
			tcp6:  []string{line(peerV6, oursV6, "01", "0", "2002")},
			local: "[::1]:8080", peer: "[::1]:40000",
			want: portforward.Peer{Local: true, PortForward: true}},
		{name: "an IPv6 socket dialing 127.0.0.1 is listed mapped",
			tcp6:  []string{line(peerMapped, "0000000000000000FFFF00000100007F:1F90", "01", "0", "2002")},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true, PortForward: true}},
		{name: "a user's socket from loopback is not",
			tcp4:  []string{server4, line(peerV4, oursV4, "01", "1000", "2002")},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true}, reasonSubstr: "belongs to uid 1000"},
		{name: "time-wait remains list uid 0 and no inode: not trusted",
			tcp4:  []string{line(peerV4, oursV4, "06", "0", "0")},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true}, reasonSubstr: "not an open, established socket"},
		{name: "an orphaned socket has no inode: not trusted",
			tcp4:  []string{line(peerV4, oursV4, "01", "0", "0")},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true}, reasonSubstr: "not an open, established socket"},
		{name: "a loopback peer that is gone is not",
			tcp4:  []string{server4},
			local: "127.0.0.1:8080", peer: "127.0.0.1:40000",
			want: portforward.Peer{Local: true}, reasonSubstr: "not listed"},
		{name: "a peer on this namespace's own address is local",
			tcp4:  []string{line("090012C6:9C40", "090012C6:1F90", "01", "1000", "2002")},
			local: "198.18.0.9:8080", peer: "198.18.0.9:40000", locals: []string{"198.18.0.9"},
			want: portforward.Peer{Local: true}, reasonSubstr: "belongs to uid 1000"},
		{name: "a peer elsewhere is remote",
			local: "198.18.0.9:8080", peer: "198.18.0.20:40000", locals: []string{"198.18.0.9"},
			want: portforward.Peer{Remote: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := portforward.Recognizer{ProcNet: procNet(t, tc.tcp4, tc.tcp6), LocalAddrs: func() ([]netip.Addr, error) {
				var out []netip.Addr
				for _, s := range tc.locals {
					out = append(out, netip.MustParseAddr(s))
				}
				return out, nil
			}}
			got := r.Check(tcp(tc.local), tcp(tc.peer))
			if !strings.Contains(got.Reason, tc.reasonSubstr) {
				t.Errorf("reason %q does not say %q", got.Reason, tc.reasonSubstr)
			}
			got.Reason = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

// accept listens on 127.0.0.1, runs dial, and returns the server's end of the connection.
func accept(t *testing.T, dial func(addr string) net.Conn) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client = dial(ln.Addr().String())
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return server, client
}

// TestRealSockets checks the kernel's own tables: a root socket on loopback is the port-forward's
// shape, a socket of another user on the same loopback is not, and neither is what such a
// socket leaves behind once closed (the kernel lists it as uid 0).
func TestRealSockets(t *testing.T) {
	var r portforward.Recognizer
	rootConn, _ := accept(t, func(addr string) net.Conn { return framework.DialAsUID(t, 0, addr) })
	if got := r.Check(rootConn.LocalAddr(), rootConn.RemoteAddr()); !got.PortForward || !got.Local {
		t.Errorf("root on loopback: %+v, want the port-forward", got)
	}

	userConn, userClient := accept(t, func(addr string) net.Conn { return framework.DialAsUID(t, nobody, addr) })
	got := r.Check(userConn.LocalAddr(), userConn.RemoteAddr())
	if got.PortForward || !got.Local || !strings.Contains(got.Reason, "belongs to uid 65534") {
		t.Errorf("uid %d on loopback: %+v, want local, not the port-forward, naming the uid", nobody, got)
	}

	_ = userClient.Close()
	framework.Eventually(t, func(context.Context) error {
		got := r.Check(userConn.LocalAddr(), userConn.RemoteAddr())
		if got.PortForward {
			t.Fatalf("a closed uid %d socket passed as the port-forward: %+v", nobody, got)
		}
		if strings.Contains(got.Reason, "belongs to uid") {
			return net.ErrClosed // the close has not reached the table yet
		}
		return nil
	})
}

// TestFromRequestChecksOncePerConnection serves HTTP with the Recognizer's ConnContext: a root
// client on loopback is recognised on every request of its keep-alive connection, a client of
// another user is not.
func TestFromRequestChecksOncePerConnection(t *testing.T) {
	var r portforward.Recognizer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnContext: r.ConnContext, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if r.FromRequest(req).PortForward {
				_, _ = w.Write([]byte("port-forward"))
				return
			}
			_, _ = w.Write([]byte("other"))
		})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for _, tc := range []struct {
		uid  int
		want string
	}{{0, "port-forward"}, {nobody, "other"}} {
		conn := framework.DialAsUID(t, tc.uid, ln.Addr().String())
		client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil },
			MaxConnsPerHost: 1}}
		for i := range 2 {
			resp, err := client.Get("http://" + ln.Addr().String() + "/")
			if err != nil {
				t.Fatalf("uid %d request %d: %v", tc.uid, i, err)
			}
			b, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || string(b) != tc.want {
				t.Errorf("uid %d request %d: %q (%v), want %q", tc.uid, i, b, err, tc.want)
			}
		}
	}
}
