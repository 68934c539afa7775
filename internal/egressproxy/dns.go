package egressproxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTimeout bounds one upstream exchange.
const dnsTimeout = 5 * time.Second

// maxUDPAnswer is the plain DNS limit; larger answers are truncated so the client asks over TCP.
const maxUDPAnswer = 512

// ServeDNS answers sandboxes' DNS questions arriving on pc (UDP) until pc is closed.
func (s *Server) ServeDNS(pc net.PacketConn) error {
	buf := make([]byte, 65535)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
			defer cancel()
			if reply := s.answer(ctx, addrOf(addr), query, true); reply != nil {
				_, _ = pc.WriteTo(reply, addr)
			}
		}()
	}
}

// ServeDNSStream answers DNS over TCP on l until l is closed.
func (s *Server) ServeDNSStream(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer func() { _ = c.Close() }()
			for {
				_ = c.SetDeadline(time.Now().Add(2 * dnsTimeout))
				query, err := readStreamMsg(c)
				if err != nil {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), dnsTimeout)
				reply := s.answer(ctx, addrOf(c.RemoteAddr()), query, false)
				cancel()
				if reply == nil || writeStreamMsg(c, reply) != nil {
					return
				}
			}
		}()
	}
}

// answer is the reply to one query from src, nil when it is not worth one.
func (s *Server) answer(ctx context.Context, src netip.Addr, query []byte, udp bool) []byte {
	var p dnsmessage.Parser
	hdr, err := p.Start(query)
	if err != nil || hdr.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return reply(hdr, nil, dnsmessage.RCodeFormatError, nil)
	}
	q := qs[0]
	sb := s.sandbox(src)
	switch {
	case sb == nil:
		return reply(hdr, &q, dnsmessage.RCodeRefused, nil)
	case q.Class != dnsmessage.ClassINET:
		return reply(hdr, &q, dnsmessage.RCodeNotImplemented, nil)
	}
	name := hostName(q.Name.String())
	if !sb.Policy.Resolvable(name) {
		s.cfg.Log.V(1).Info("DNS question refused by policy", "sandbox", sb.ID, "name", name)
		return reply(hdr, &q, dnsmessage.RCodeNameError, nil)
	}
	if q.Type == dnsmessage.TypeAAAA { // no IPv6 for a policed sandbox: an empty answer, not an error
		return reply(hdr, &q, dnsmessage.RCodeSuccess, nil)
	}
	up, err := s.exchange(ctx, q)
	if err != nil {
		s.cfg.Log.V(1).Info("upstream DNS failed", "sandbox", sb.ID, "name", name, "err", err.Error())
		return reply(hdr, &q, dnsmessage.RCodeServerFailure, nil)
	}
	if q.Type == dnsmessage.TypeA {
		s.remember(name, up)
	}
	out := reply(hdr, &q, up.RCode, up.Answers)
	if udp && len(out) > maxUDPAnswer {
		m := dnsHeader(hdr, dnsmessage.RCodeSuccess)
		m.Truncated = true
		m.Questions = []dnsmessage.Question{q}
		out, _ = m.Pack()
	}
	return out
}

func (s *Server) remember(name string, m *dnsmessage.Message) {
	for _, rr := range m.Answers {
		if a, ok := rr.Body.(*dnsmessage.AResource); ok {
			s.names.add(name, time.Duration(rr.Header.TTL)*time.Second, netip.AddrFrom4(a.A))
		}
	}
}

// resolvesTo reports whether name resolves to dst: an answer the egress DNS gave recently, or
// a lookup now.
func (s *Server) resolvesTo(ctx context.Context, name string, dst netip.Addr) bool {
	if s.names.has(name, dst) {
		return true
	}
	q := dnsmessage.Question{Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	n, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return false
	}
	q.Name = n
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	m, err := s.exchange(ctx, q)
	if err != nil {
		return false
	}
	s.remember(name, m)
	return s.names.has(name, dst)
}

// exchange asks the upstream resolver q, over UDP and again over TCP when the answer is
// truncated. The query is built anew: nothing of the sandbox's packet but the question leaves.
func (s *Server) exchange(ctx context.Context, q dnsmessage.Question) (*dnsmessage.Message, error) {
	var id [2]byte
	_, _ = rand.Read(id[:])
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: binary.BigEndian.Uint16(id[:]), RecursionDesired: true},
		Questions: []dnsmessage.Question{q},
	}
	packed, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	m, err := s.exchangeOver(ctx, "udp", packed, msg.ID, q)
	if err == nil && m.Truncated {
		m, err = s.exchangeOver(ctx, "tcp", packed, msg.ID, q)
	}
	return m, err
}

func (s *Server) exchangeOver(ctx context.Context, network string, packed []byte, id uint16, q dnsmessage.Question) (*dnsmessage.Message, error) {
	c, err := s.cfg.Dial(ctx, network, s.cfg.UpstreamDNS)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	var raw []byte
	if network == "tcp" {
		if err := writeStreamMsg(c, packed); err != nil {
			return nil, err
		}
		if raw, err = readStreamMsg(c); err != nil {
			return nil, err
		}
	} else {
		if _, err := c.Write(packed); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		for { // skip stray datagrams that are not the answer
			n, err := c.Read(buf)
			if err != nil {
				return nil, err
			}
			raw = buf[:n]
			if len(raw) >= 2 && binary.BigEndian.Uint16(raw) == id {
				break
			}
		}
	}
	var m dnsmessage.Message
	if err := m.Unpack(raw); err != nil {
		return nil, fmt.Errorf("upstream DNS answer: %w", err)
	}
	if m.ID != id || len(m.Questions) != 1 || m.Questions[0] != q {
		return nil, errors.New("upstream DNS answer does not match the question")
	}
	return &m, nil
}

func dnsHeader(query dnsmessage.Header, rcode dnsmessage.RCode) dnsmessage.Message {
	return dnsmessage.Message{Header: dnsmessage.Header{
		ID: query.ID, Response: true, OpCode: query.OpCode, RecursionDesired: query.RecursionDesired,
		RecursionAvailable: true, RCode: rcode,
	}}
}

func reply(query dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode, answers []dnsmessage.Resource) []byte {
	m := dnsHeader(query, rcode)
	if q != nil {
		m.Questions = []dnsmessage.Question{*q}
	}
	m.Answers = answers
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

func readStreamMsg(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(n[:]))
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func writeStreamMsg(w io.Writer, msg []byte) error {
	buf := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(msg)), uint16(len(msg)))
	_, err := w.Write(append(buf, msg...))
	return err
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
