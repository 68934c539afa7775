// Package portforward recognises connections that the container runtime opened for the API
// server's port-forward (`kubectl port-forward`, client-go's SPDY tunnel). The runtime (containerd,
// CRI-O) enters the Pod's network namespace as root and dials localhost:PORT, so such a
// connection arrives from loopback, and its peer socket, which the kernel lists in the same
// namespace's /proc/net/tcp{,6}, belongs to uid 0. Code in the Pod that is not root can reach the
// same listener from loopback or from the Pod's own address, but its socket carries its own uid,
// which nothing but root can change. docs/design/credentials.md reasons this out.
package portforward

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// RuntimeUID is the owner of the port-forward's socket: the container runtime runs as root.
const RuntimeUID = 0

// tcpEstablished is TCP_ESTABLISHED in /proc/net/tcp's "st" column. Only established sockets are
// trusted: the kernel lists a closed peer's time-wait remains as uid 0.
const tcpEstablished = 0x01

// Peer is what a Recognizer found out about the far end of a connection.
type Peer struct {
	// Remote: the peer came over the network, from an address that is not this network
	// namespace's.
	Remote bool
	// Local: the peer is in this network namespace (it came from loopback or from one of this
	// namespace's own addresses). A peer that is neither (not TCP) is unknown.
	Local bool
	// PortForward: a local peer whose socket is established and belongs to RuntimeUID, that is
	// the container runtime's port-forward (or root in this Pod, which has more already).
	PortForward bool
	// Reason says why a local peer is not the port-forward, for logs and errors.
	Reason string
}

// Recognizer classifies the peers of accepted TCP connections. The zero value reads the
// network namespace of the calling process.
type Recognizer struct {
	// ProcNet is the directory holding tcp and tcp6 of this network namespace; "" is
	// /proc/self/net.
	ProcNet string
	// LocalAddrs lists this namespace's own addresses; nil uses net.InterfaceAddrs. Loopback
	// addresses are always local.
	LocalAddrs func() ([]netip.Addr, error)
}

// Check classifies the peer remote of a connection accepted on local. It fails closed: a local
// peer whose socket cannot be found or read is not the port-forward.
func (r Recognizer) Check(local, remote net.Addr) Peer {
	l, lok := addrPort(local)
	p, pok := addrPort(remote)
	if !lok || !pok {
		// Not TCP over IP (a Unix socket, a test's pipe): nothing to recognise.
		return Peer{Reason: "not a TCP connection"}
	}
	isLocal, err := r.isLocal(p.Addr())
	if err != nil {
		return Peer{Local: true, Reason: fmt.Sprintf("listing this network namespace's addresses: %v", err)}
	}
	if !isLocal {
		return Peer{Remote: true}
	}
	s, err := r.findSocket(p, l)
	switch {
	case err != nil:
		return Peer{Local: true, Reason: err.Error()}
	case s.state != tcpEstablished || s.inode == 0:
		return Peer{Local: true, Reason: fmt.Sprintf("the peer socket %s is not an open, established socket (state %02X)", p, s.state)}
	case s.uid != RuntimeUID:
		return Peer{Local: true, Reason: fmt.Sprintf("the peer socket %s belongs to uid %d, not to the container runtime (uid %d)", p, s.uid, RuntimeUID)}
	}
	return Peer{Local: true, PortForward: true}
}

func addrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok || t == nil {
		return netip.AddrPort{}, false
	}
	ap := t.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.Addr().IsValid()
}

func (r Recognizer) isLocal(a netip.Addr) (bool, error) {
	if a.IsLoopback() {
		return true, nil
	}
	list := r.LocalAddrs
	if list == nil {
		list = interfaceAddrs
	}
	addrs, err := list()
	if err != nil {
		return false, err
	}
	for _, own := range addrs {
		if own.Unmap() == a {
			return true, nil
		}
	}
	return false, nil
}

func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// socket is one line of /proc/net/tcp{,6}.
type socket struct {
	local, remote netip.AddrPort
	state         uint64
	uid           uint64
	inode         uint64
}

// findSocket finds the socket whose local end is peer and whose remote end is ours: the other
// end of our connection, listed because it lives in the same network namespace.
func (r Recognizer) findSocket(peer, ours netip.AddrPort) (socket, error) {
	dir := r.ProcNet
	if dir == "" {
		dir = "/proc/self/net"
	}
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
				continue // a kernel without IPv6
			}
			return socket{}, fmt.Errorf("reading the peer's socket: %w", err)
		}
		s, found, err := scan(f, peer, ours)
		_ = f.Close()
		if err != nil {
			return socket{}, fmt.Errorf("reading %s: %w", f.Name(), err)
		}
		if found {
			return s, nil
		}
	}
	return socket{}, fmt.Errorf("the peer socket %s is not listed in this network namespace (closed already)", peer)
}

// scan reads a /proc/net/tcp{,6} table for the socket local=peer, remote=ours.
func scan(rd io.Reader, peer, ours netip.AddrPort) (socket, bool, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 512), 4096)
	header := true
	for sc.Scan() {
		if header {
			header = false
			continue
		}
		s, err := parseLine(sc.Text())
		if err != nil {
			return socket{}, false, err
		}
		if s.local == peer && s.remote == ours {
			return s, true, nil
		}
	}
	return socket{}, false, sc.Err()
}

// parseLine parses "sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...".
func parseLine(line string) (socket, error) {
	f := strings.Fields(line)
	if len(f) < 10 {
		return socket{}, fmt.Errorf("short line %q", line)
	}
	var s socket
	var err error
	if s.local, err = parseAddrPort(f[1]); err != nil {
		return s, err
	}
	if s.remote, err = parseAddrPort(f[2]); err != nil {
		return s, err
	}
	if s.state, err = strconv.ParseUint(f[3], 16, 8); err != nil {
		return s, fmt.Errorf("state %q: %w", f[3], err)
	}
	if s.uid, err = strconv.ParseUint(f[7], 10, 32); err != nil {
		return s, fmt.Errorf("uid %q: %w", f[7], err)
	}
	if s.inode, err = strconv.ParseUint(f[9], 10, 64); err != nil {
		return s, fmt.Errorf("inode %q: %w", f[9], err)
	}
	return s, nil
}

// parseAddrPort decodes "0100007F:1F90" (IPv4) or 32 hex digits ":port" (IPv6). The kernel
// prints each 32-bit word of the address as a number in the host's byte order, the port as a
// plain number.
func parseAddrPort(s string) (netip.AddrPort, error) {
	hexAddr, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q has no port", s)
	}
	raw, err := hex.DecodeString(hexAddr)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q is not 8 or 32 hex digits", hexAddr)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", hexPort, err)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// connKey is the context key of a connection's lazily checked peer.
type connKey struct{}

type lazyPeer struct {
	once  sync.Once
	peer  Peer
	check func() Peer
}

// ConnContext is an http.Server ConnContext: it remembers c so that the first request that asks
// checks the peer once for the whole connection (keep-alive requests reuse the answer).
func (r Recognizer) ConnContext(ctx context.Context, c net.Conn) context.Context {
	local, remote := c.LocalAddr(), c.RemoteAddr()
	return context.WithValue(ctx, connKey{}, &lazyPeer{check: func() Peer { return r.Check(local, remote) }})
}

// FromRequest classifies the peer of req's connection: once per connection when the server's
// ConnContext is r.ConnContext, else from req's addresses.
func (r Recognizer) FromRequest(req *http.Request) Peer {
	if lp, ok := req.Context().Value(connKey{}).(*lazyPeer); ok {
		lp.once.Do(func() { lp.peer = lp.check() })
		return lp.peer
	}
	local, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	remote, err := net.ResolveTCPAddr("tcp", req.RemoteAddr)
	if err != nil || local == nil {
		return Peer{Reason: "the request carries no TCP addresses"}
	}
	return r.Check(local, remote)
}
