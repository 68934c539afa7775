package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// handshakeTimeout bounds a TLS handshake the proxy takes part in.
const handshakeTimeout = 10 * time.Second

// intercept terminates the sandbox's TLS for sni with a leaf of the installation's CA, and
// serves its requests over TLS to dst, verified for sni.
func (s *Server) intercept(ctx context.Context, conn net.Conn, br *bufio.Reader, src netip.Addr, sni string, dst netip.AddrPort) {
	leaf, err := s.cfg.CA.Leaf(sni)
	if err != nil {
		s.cfg.Log.Error(err, "cannot issue a leaf", "name", sni)
		reset(conn)
		return
	}
	tc := tls.Server(buffered{Conn: conn, br: br}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.cfg.Log.V(1).Info("sandbox's TLS handshake failed (does it trust the egress CA?)", "name", sni, "err", err.Error())
		return
	}
	dial := func() (net.Conn, error) {
		raw, err := s.cfg.Dial(ctx, "tcp", dst.String())
		if err != nil {
			return nil, err
		}
		up := tls.Client(raw, &tls.Config{ServerName: sni, RootCAs: s.cfg.RootCAs, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		if err := up.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS to %s for %s: %w", dst, sni, err)
		}
		return up, nil
	}
	s.serveHTTP(ctx, tc, bufio.NewReader(tc), src, dst, sni, dial)
}

// serveHTTP proxies the HTTP/1 requests read from br to one upstream connection, deciding each
// request's Host under the sandbox's current policy and adding the headers its inject rule
// names. With sni set (terminated TLS), every Host must be sni.
func (s *Server) serveHTTP(ctx context.Context, conn net.Conn, br *bufio.Reader, src netip.Addr, dst netip.AddrPort, sni string, dial func() (net.Conn, error)) {
	var up net.Conn
	var upBR *bufio.Reader
	t := &tracked{name: sni, dst: dst.Addr()}
	t.close = func() {
		reset(conn)
		t.mu.Lock()
		defer t.mu.Unlock()
		if up != nil {
			_ = up.Close()
		}
	}
	defer s.track(src, t)()
	defer func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if up != nil {
			_ = up.Close()
		}
	}()
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				refuseHTTP(conn, http.StatusBadRequest, "paddock egress: malformed HTTP request")
			}
			return
		}
		host := hostName(req.Host)
		sb := s.sandbox(src)
		if sb == nil {
			refuseHTTP(conn, http.StatusForbidden, "paddock egress: this sandbox has no egress")
			return
		}
		if sni != "" && host != sni {
			s.cfg.Log.V(1).Info("request refused: Host differs from SNI", "sandbox", sb.ID, "sni", sni, "host", req.Host)
			refuseHTTP(conn, http.StatusMisdirectedRequest, fmt.Sprintf("paddock egress: Host %q does not match the TLS server name %q", req.Host, sni))
			return
		}
		t.mu.Lock()
		t.name = host
		t.mu.Unlock()
		if v := s.permit(ctx, sb, host, dst.Addr()); !v.Allowed {
			s.cfg.Log.V(1).Info("request refused", "sandbox", sb.ID, "host", host, "dst", dst, "rule", v.Rule)
			refuseHTTP(conn, http.StatusForbidden, fmt.Sprintf("paddock egress: %q at %s is not allowed for this sandbox (%s)", req.Host, dst.Addr(), v.Rule))
			return
		}
		if rule, ok := sb.Policy.Inject(host); ok {
			for _, h := range rule.Headers {
				v, ok := sb.Secrets[h.SecretKeyRef]
				if !ok {
					refuseHTTP(conn, http.StatusServiceUnavailable, fmt.Sprintf("paddock egress: the credential for %q is not available", host))
					return
				}
				req.Header.Set(h.Name, v)
			}
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // keep Request.Write from adding Go's own
		}
		if up == nil {
			c, err := dial()
			if err != nil {
				s.cfg.Log.V(1).Info("upstream failed", "sandbox", sb.ID, "host", host, "dst", dst, "err", err.Error())
				refuseHTTP(conn, http.StatusBadGateway, "paddock egress: "+err.Error())
				return
			}
			t.mu.Lock()
			up = c
			t.mu.Unlock()
			upBR = bufio.NewReader(up)
		}
		if !s.roundTrip(conn, br, req, up, upBR) {
			return
		}
	}
}

// roundTrip writes req to up and its response to conn. It reports whether the connection may
// carry another request.
func (s *Server) roundTrip(conn net.Conn, br *bufio.Reader, req *http.Request, up net.Conn, upBR *bufio.Reader) bool {
	wrote := make(chan error, 1)
	go func() { wrote <- req.Write(up) }() // concurrently, so a 100 Continue can reach the client
	for {
		resp, err := http.ReadResponse(upBR, req)
		if err != nil {
			refuseHTTP(conn, http.StatusBadGateway, "paddock egress: the destination's response: "+err.Error())
			return false
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if resp.Write(conn) != nil {
				return false
			}
			splice(conn, br, up, upBR)
			return false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.Write(conn) != nil {
				return false
			}
			continue
		}
		err = resp.Write(conn)
		_ = resp.Body.Close()
		if err != nil || <-wrote != nil {
			return false
		}
		return !resp.Close && !req.Close
	}
}

func refuseHTTP(conn net.Conn, code int, msg string) {
	body := msg + "\n"
	_, _ = fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
