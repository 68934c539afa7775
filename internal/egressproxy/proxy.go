package egressproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// clientBuffer holds a whole TLS record (a ClientHello) or an HTTP request line.
const clientBuffer = 5 + 16384 + 2048

// maxRequestLine bounds the bytes read looking for an HTTP request line.
const maxRequestLine = 8192

var errSniffed = errors.New("client hello read")

// Serve proxies the connections the node redirects to l until l is closed.
func (s *Server) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go s.handle(c)
	}
}

func (s *Server) handle(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	ctx := context.Background()
	src := addrOf(conn.RemoteAddr())
	sb := s.sandbox(src)
	if sb == nil {
		s.cfg.Log.V(1).Info("connection from an address with no policy refused", "src", src)
		reset(conn)
		return
	}
	dst, err := s.cfg.OriginalDst(conn)
	if err != nil {
		s.cfg.Log.Error(err, "original destination unknown; connection refused", "sandbox", sb.ID)
		reset(conn)
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if s.cfg.AlwaysDeny.Contains(dst.Addr()) || !dst.Addr().Is4() {
		s.refuse(conn, sb, "", dst, "always denied")
		return
	}
	pol := sb.Policy
	if pol.AddressDecides(dst.Addr()) && !pol.HasInject() {
		s.spliceIfPermitted(ctx, conn, conn, src, sb, "", dst)
		return
	}
	br := bufio.NewReaderSize(conn, clientBuffer)
	kind, sni := s.sniff(conn, br)
	switch kind {
	case firstTLS:
		if _, inject := pol.Inject(sni); inject && sni != "" {
			if v := s.permit(ctx, sb, sni, dst.Addr()); !v.Allowed {
				s.refuse(conn, sb, sni, dst, v.Rule)
				return
			}
			s.intercept(ctx, conn, br, src, sni, dst)
			return
		}
		s.spliceIfPermitted(ctx, conn, br, src, sb, sni, dst)
	case firstHTTP:
		s.serveHTTP(ctx, conn, br, src, dst, "", func() (net.Conn, error) { return s.cfg.Dial(ctx, "tcp", dst.String()) })
	default:
		s.spliceIfPermitted(ctx, conn, br, src, sb, "", dst)
	}
}

// spliceIfPermitted decides the connection on name and dst, then copies bytes both ways.
func (s *Server) spliceIfPermitted(ctx context.Context, conn net.Conn, client io.Reader, src netip.Addr, sb *Sandbox, name string, dst netip.AddrPort) {
	v := s.permit(ctx, sb, name, dst.Addr())
	if !v.Allowed {
		s.refuse(conn, sb, name, dst, v.Rule)
		return
	}
	s.cfg.Log.V(1).Info("connection allowed", "sandbox", sb.ID, "name", name, "dst", dst, "rule", v.Rule)
	up, err := s.cfg.Dial(ctx, "tcp", dst.String())
	if err != nil {
		s.cfg.Log.V(1).Info("destination unreachable", "sandbox", sb.ID, "dst", dst, "err", err.Error())
		reset(conn)
		return
	}
	defer func() { _ = up.Close() }()
	t := &tracked{name: name, dst: dst.Addr(), close: func() { reset(conn); _ = up.Close() }}
	defer s.track(src, t)()
	if s.sandbox(src) != sb { // the policy changed between the decision and the tracking
		if v := s.permit(ctx, s.sandbox(src), name, dst.Addr()); !v.Allowed {
			return
		}
	}
	splice(conn, client, up, up)
}

// splice copies client to up and up to conn, half-closing each side as its source ends.
func splice(conn net.Conn, client io.Reader, up net.Conn, upReader io.Reader) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, client)
		closeWrite(up)
	}()
	_, _ = io.Copy(conn, upReader)
	closeWrite(conn)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func (s *Server) refuse(conn net.Conn, sb *Sandbox, name string, dst netip.AddrPort, rule string) {
	s.cfg.Log.V(1).Info("connection refused", "sandbox", sb.ID, "name", name, "dst", dst, "rule", rule)
	reset(conn)
}

// reset closes c with a TCP reset, so the client sees "connection reset", not a clean end.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

type firstBytes int

const (
	firstOther firstBytes = iota
	firstTLS
	firstHTTP
)

// sniff looks at the client's first bytes without consuming them: a TLS ClientHello (and its
// SNI) or an HTTP request line. A client that stays silent for PeekTimeout is firstOther.
func (s *Server) sniff(conn net.Conn, br *bufio.Reader) (firstBytes, string) {
	_ = conn.SetReadDeadline(time.Now().Add(s.cfg.PeekTimeout))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	b, err := br.Peek(1)
	if err != nil {
		return firstOther, ""
	}
	if b[0] == 0x16 { // TLS handshake record
		hdr, err := br.Peek(5)
		if err != nil {
			return firstOther, ""
		}
		n := 5 + (int(hdr[3])<<8 | int(hdr[4]))
		rec, err := br.Peek(min(n, clientBuffer))
		if err != nil {
			return firstOther, ""
		}
		return firstTLS, serverName(rec)
	}
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n")); i >= 0 {
			if isRequestLine(buf[:i]) {
				return firstHTTP, ""
			}
			return firstOther, ""
		}
		if len(buf) >= maxRequestLine {
			return firstOther, ""
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			return firstOther, ""
		}
	}
}

// isRequestLine matches "METHOD SP target SP HTTP/1.x".
func isRequestLine(line []byte) bool {
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(method) == 0 {
		return false
	}
	for _, c := range method {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	_, proto, ok := bytes.Cut(rest, []byte(" "))
	return ok && (bytes.Equal(proto, []byte("HTTP/1.1")) || bytes.Equal(proto, []byte("HTTP/1.0")))
}

// serverName is the SNI of the ClientHello in record, "" when there is none or it cannot be read.
func serverName(record []byte) string {
	var name string
	_ = tls.Server(readOnly{r: bytes.NewReader(record)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name = h.ServerName
			return nil, errSniffed
		},
	}).Handshake()
	return hostName(name)
}

// readOnly is a net.Conn over a reader that discards writes, for reading a ClientHello.
type readOnly struct {
	net.Conn
	r io.Reader
}

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write(p []byte) (int, error)      { return len(p), nil }
func (readOnly) Close() error                     { return nil }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }
func (readOnly) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (readOnly) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// buffered is conn read through br, so bytes already peeked are not lost.
type buffered struct {
	net.Conn
	br *bufio.Reader
}

func (c buffered) Read(p []byte) (int, error) { return c.br.Read(p) }
