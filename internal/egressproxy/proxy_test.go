package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/paddock-dev/paddock/api/egress"
)

const secretValue = "Bearer sk-test-never-inside-the-sandbox"

var secretRef = egress.SecretKeyRef{Name: "openai", Key: "authorization"}

// mainPolicy allows two names, a wildcard and one address, denies the rest, and injects a
// credential for api.example.test.
const mainPolicy = `{"allow":["api.example.test","pypi.example.test","*.cdn.example.test","bad-cert.example.test","127.0.1.5"],
 "deny":["0.0.0.0/0"],
 "inject":[{"domain":"api.example.test","headers":[{"name":"Authorization","secretKeyRef":{"name":"openai","key":"authorization"}}]},
           {"domain":"bad-cert.example.test","headers":[{"name":"Authorization","secretKeyRef":{"name":"openai","key":"authorization"}}]}]}`

type world struct {
	*env
	api, pypi, cdn, evil, badCert, cluster *host
	echo, other                            *echoServer
	main                                   *pod
}

func newWorld(t testing.TB) *world {
	e := newEnv(t)
	w := &world{env: e}
	w.api = e.addHost("api.example.test", "127.0.1.1", "api.example.test")
	w.pypi = e.addHost("pypi.example.test", "127.0.1.2", "pypi.example.test")
	w.cdn = e.addHost("files.cdn.example.test", "127.0.1.3", "files.cdn.example.test")
	e.zone.add("dns.resolver.test", "127.0.1.3") // a DoH name served from the CDN's address
	w.evil = e.addHost("evil.example.test", "127.0.1.4", "evil.example.test")
	w.badCert = e.addHost("bad-cert.example.test", "127.0.1.7", "other.example.test")
	w.cluster = e.addHost("internal.example.test", clusterAddr, "internal.example.test")
	w.echo = startEcho(t, "127.0.1.5")
	w.other = startEcho(t, "127.0.1.6")
	w.main = e.sandbox("127.0.2.1", mainPolicy, map[egress.SecretKeyRef]string{secretRef: secretValue})
	return w
}

func url(scheme string, h *host, name string) string {
	port := h.http
	if scheme == "https" {
		port = h.tls
	}
	return fmt.Sprintf("%s://%s:%s/", scheme, name, port)
}

// echoServer writes a banner, then echoes; it counts the connections it accepted.
type echoServer struct {
	addr     netip.AddrPort
	accepted atomic.Int32
}

func startEcho(t testing.TB, ip string) *echoServer {
	l := listen(t, "tcp", ip+":0")
	s := &echoServer{addr: netip.MustParseAddrPort(l.Addr().String())}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.WriteString(c, "banner\n")
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return s
}

// ask sends one DNS question from src to the egress DNS and returns the reply.
func (e *env) ask(src, name string, typ dnsmessage.Type) dnsmessage.Message {
	e.t.Helper()
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("udp", e.dns)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	q := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name + "."), Type: typ, Class: dnsmessage.ClassINET}}}
	out, _ := q.Pack()
	if _, err := c.Write(out); err != nil {
		e.t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		e.t.Fatalf("DNS %s from %s: %v", name, src, err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func answers(m dnsmessage.Message) []string {
	var out []string
	for _, rr := range m.Answers {
		if a, ok := rr.Body.(*dnsmessage.AResource); ok {
			out = append(out, netip.AddrFrom4(a.A).String())
		}
	}
	return out
}

func TestDNSAnswersOnlyWhatThePolicyNames(t *testing.T) {
	w := newWorld(t)
	open := w.sandbox("127.0.2.2", `{"deny":["203.0.113.0/24"]}`, nil)
	_ = open
	for _, tc := range []struct {
		src, name string
		typ       dnsmessage.Type
		rcode     dnsmessage.RCode
		answers   string
		upstream  int // questions the upstream resolver must have seen for name
	}{
		{"127.0.2.1", "pypi.example.test", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "127.0.1.2", 1},
		{"127.0.2.1", "files.cdn.example.test", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "127.0.1.3", 1},
		{"127.0.2.1", "evil.example.test", dnsmessage.TypeA, dnsmessage.RCodeNameError, "", 0},
		{"127.0.2.1", "c2VjcmV0.evil.example.test", dnsmessage.TypeTXT, dnsmessage.RCodeNameError, "", 0},
		{"127.0.2.1", "cdn.example.test", dnsmessage.TypeA, dnsmessage.RCodeNameError, "", 0},
		{"127.0.2.1", "api.example.test", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, "", 0},
		{"127.0.2.200", "pypi.example.test", dnsmessage.TypeA, dnsmessage.RCodeRefused, "", 1},
		{"127.0.2.2", "dns.resolver.test", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "127.0.1.3", 1},
	} {
		t.Run(tc.src+" "+tc.name+" "+tc.typ.String(), func(t *testing.T) {
			m := w.ask(tc.src, tc.name, tc.typ)
			if m.RCode != tc.rcode || strings.Join(answers(m), ",") != tc.answers || m.ID != 7 || !m.Response {
				t.Errorf("got rcode %v answers %v id %d, want %v %q", m.RCode, answers(m), m.ID, tc.rcode, tc.answers)
			}
			if got := w.zone.questions(tc.name); got != tc.upstream {
				t.Errorf("the upstream resolver saw %d questions for %s, want %d", got, tc.name, tc.upstream)
			}
		})
	}
}

func TestDNSOverTCP(t *testing.T) {
	w := newWorld(t)
	ips, err := w.main.resolver().LookupNetIP(context.Background(), "ip4", "pypi.example.test")
	if err != nil || len(ips) != 1 || ips[0].String() != w.pypi.ip {
		t.Fatalf("UDP: got %v %v", ips, err)
	}
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: w.main.src.AsSlice()}}).Dial("tcp", w.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for _, tc := range []struct {
		name  string
		rcode dnsmessage.RCode
	}{{"pypi.example.test", dnsmessage.RCodeSuccess}, {"evil.example.test", dnsmessage.RCodeNameError}} {
		q := dnsmessage.Message{Header: dnsmessage.Header{ID: 9}, Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(tc.name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}
		out, _ := q.Pack()
		if err := writeStreamMsg(c, out); err != nil {
			t.Fatal(err)
		}
		raw, err := readStreamMsg(c)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(raw); err != nil || m.RCode != tc.rcode || m.ID != 9 {
			t.Fatalf("%s over TCP: got %v %v", tc.name, m.Header, err)
		}
	}
}

func TestHTTPByHost(t *testing.T) {
	w := newWorld(t)
	t.Run("allowed domain", func(t *testing.T) {
		code, body, err := w.main.get(url("http", w.pypi, "pypi.example.test"), nil, nil)
		if err != nil || code != 200 || body != "hello from pypi.example.test\n" {
			t.Fatalf("got %d %q %v", code, body, err)
		}
	})
	t.Run("denied domain cannot be resolved", func(t *testing.T) {
		if _, _, err := w.main.get(url("http", w.evil, "evil.example.test"), nil, nil); err == nil || !strings.Contains(err.Error(), "no such host") {
			t.Fatalf("got %v, want no such host", err)
		}
	})
	t.Run("denied domain by address", func(t *testing.T) {
		code, body, err := w.main.get(url("http", w.evil, w.evil.ip), nil, http.Header{"Host": {"evil.example.test"}})
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, "not allowed") {
			t.Fatalf("got %d %q %v, want 403", code, body, err)
		}
	})
	t.Run("Host fronting to an allowed address", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url("http", w.pypi, w.pypi.ip), nil)
		req.Host = "evil.example.test"
		resp, err := w.main.client(nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("got %d, want 403", resp.StatusCode)
		}
	})
	t.Run("a second Host on a kept-alive connection", func(t *testing.T) {
		c, err := w.main.dial(context.Background(), "pypi.example.test:"+w.pypi.http)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		br := bufio.NewReader(c)
		for i, tc := range []struct {
			host string
			code int
		}{{"pypi.example.test", 200}, {"evil.example.test", 403}} {
			_, _ = fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", tc.host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("request %d (Host %s): got %d, want %d", i, tc.host, resp.StatusCode, tc.code)
			}
		}
	})
	t.Run("credential injected over HTTP", func(t *testing.T) {
		code, body, err := w.main.get(url("http", w.api, "api.example.test"), nil, http.Header{"Authorization": {"Bearer mine"}})
		if err != nil || code != 200 || strings.Contains(body, secretValue) {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		seen := w.api.requests()
		if len(seen) != 1 || seen[0].Header.Get("Authorization") != secretValue || len(seen[0].Header.Values("Authorization")) != 1 {
			t.Fatalf("the host saw %v, want exactly the injected credential", seen)
		}
		if seen[0].Header.Get("User-Agent") != "Go-http-client/1.1" {
			t.Errorf("User-Agent %q: the proxy changed the client's headers", seen[0].Header.Get("User-Agent"))
		}
	})
	for _, h := range []*host{w.evil, w.cluster} {
		if n := len(h.requests()); n != 0 {
			t.Errorf("%s got %d requests, want none", h.name, n)
		}
	}
}

// handshake opens TLS through the proxy to dst with server name sni.
func (w *world) handshake(p *pod, dst, sni string, cfg *tls.Config) error {
	c, err := p.dialAddr(context.Background(), netip.MustParseAddrPort(dst))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if cfg == nil {
		cfg = &tls.Config{RootCAs: w.publicCA.Pool()}
	}
	cfg.ServerName = sni
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc.Handshake()
}

func TestHTTPSBySNI(t *testing.T) {
	w := newWorld(t)
	t.Run("allowed domain, spliced with the host's own certificate", func(t *testing.T) {
		resp, err := w.main.client(nil).Get(url("https", w.pypi, "pypi.example.test"))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Issuer.CommonName != "test public root" {
			t.Fatalf("got %d from %s", resp.StatusCode, resp.TLS.PeerCertificates[0].Issuer)
		}
	})
	t.Run("wildcard subdomain", func(t *testing.T) {
		if err := w.handshake(w.main, w.cdn.ip+":"+w.cdn.tls, "files.cdn.example.test", nil); err != nil {
			t.Fatal(err)
		}
	})
	refused := []struct{ name, dst, sni string }{
		{"denied name", w.evil.ip + ":" + w.evil.tls, "evil.example.test"},
		{"allowed name fronted to another address", w.evil.ip + ":" + w.evil.tls, "pypi.example.test"},
		{"DoH name on an allowed CDN address", w.cdn.ip + ":" + w.cdn.tls, "dns.resolver.test"},
		{"no SNI on an allowed name's address", w.pypi.ip + ":" + w.pypi.tls, ""},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := w.handshake(w.main, tc.dst, tc.sni, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // any certificate would do: the connection must not get one
			if err == nil {
				t.Fatal("handshake succeeded, want the connection refused")
			}
		})
	}
	for _, h := range []*host{w.evil} {
		if n := len(h.requests()); n != 0 {
			t.Errorf("%s got %d requests, want none", h.name, n)
		}
	}
}

func TestCredentialInjectedOverHTTPS(t *testing.T) {
	w := newWorld(t)
	t.Run("terminated with the egress CA, re-originated verified, header replaced", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, url("https", w.api, "api.example.test"), nil)
		req.Header.Set("Authorization", "Bearer mine")
		resp, err := w.main.client(w.egressCA.Pool()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), secretValue) {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "paddock egress test" {
			t.Errorf("the sandbox saw a certificate from %q, want the egress CA", issuer)
		}
		seen := w.api.requests()
		if len(seen) != 1 || seen[0].Header.Values("Authorization")[0] != secretValue || len(seen[0].Header.Values("Authorization")) != 1 || seen[0].TLS == nil {
			t.Fatalf("the host saw %+v, want one TLS request with the injected credential", seen)
		}
	})
	t.Run("a sandbox that does not trust the egress CA gets no connection", func(t *testing.T) {
		if _, _, err := w.main.get(url("https", w.api, "api.example.test"), nil, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("got %v, want a certificate error", err)
		}
	})
	t.Run("Host other than the SNI", func(t *testing.T) {
		c, err := w.main.dial(context.Background(), "api.example.test:"+w.api.tls)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		tc := tls.Client(c, &tls.Config{ServerName: "api.example.test", RootCAs: w.egressCA.Pool()})
		_, _ = fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: pypi.example.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("got %d, want 421", resp.StatusCode)
		}
	})
	t.Run("a destination whose certificate is not for the name", func(t *testing.T) {
		code, body, err := w.main.get(url("https", w.badCert, "bad-cert.example.test"), w.egressCA.Pool(), nil)
		if err != nil || code != http.StatusBadGateway || !strings.Contains(body, "certificate") {
			t.Fatalf("got %d %q %v, want 502 naming the certificate", code, body, err)
		}
	})
	t.Run("missing credential", func(t *testing.T) {
		p := w.sandbox("127.0.2.3", mainPolicy, nil)
		code, _, err := p.get(url("https", w.api, "api.example.test"), w.egressCA.Pool(), nil)
		if err != nil || code != http.StatusServiceUnavailable {
			t.Fatalf("got %d %v, want 503", code, err)
		}
	})
	if n := len(w.api.requests()); n != 1 {
		t.Errorf("api.example.test got %d requests, want the one with the credential", n)
	}
	if n := len(w.badCert.requests()) + len(w.pypi.requests()); n != 0 {
		t.Errorf("other hosts got %d requests, want none", n)
	}
}

// readBanner connects p to dst and reads the echo server's banner.
func readBanner(p *pod, dst netip.AddrPort) (net.Conn, error) {
	c, err := p.dialAddr(context.Background(), dst)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	if err != nil || line != "banner\n" {
		_ = c.Close()
		return nil, fmt.Errorf("read %q: %w", line, err)
	}
	return c, nil
}

func TestAddressRules(t *testing.T) {
	w := newWorld(t)
	openButOne := w.sandbox("127.0.2.4", `{"deny":["127.0.1.6/32"]}`, nil)
	anyName := w.sandbox("127.0.2.5", `{"allow":["*"],"deny":["0.0.0.0/0"]}`, nil)
	stranger := &pod{e: w.env, src: netip.MustParseAddr("127.0.2.250")}
	for _, tc := range []struct {
		name string
		p    *pod
		dst  netip.AddrPort
		ok   bool
	}{
		{"allowed address, server speaks first", w.main, w.echo.addr, true},
		{"address outside allow under deny-all", w.main, w.other.addr, false},
		{"denied CIDR", openButOne, w.other.addr, false},
		{"default allow", openButOne, w.echo.addr, true},
		{"raw address with only names allowed", anyName, w.echo.addr, false},
		{"IPv6", openButOne, netip.MustParseAddrPort("[::1]:" + fmt.Sprint(w.echo.addr.Port())), false},
		{"address with no policy", stranger, w.echo.addr, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readBanner(tc.p, tc.dst)
			if c != nil {
				_ = c.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("got %v, want allowed=%v", err, tc.ok)
			}
		})
	}
	if n := w.other.accepted.Load(); n != 0 {
		t.Errorf("the denied address accepted %d connections, want none", n)
	}
	t.Run("any name, but never a cluster address", func(t *testing.T) {
		if m := w.ask("127.0.2.5", "internal.example.test", dnsmessage.TypeA); strings.Join(answers(m), ",") != clusterAddr {
			t.Fatalf("DNS: got %v, want the name resolved (it is allowed)", answers(m))
		}
		if code, _, err := anyName.get(url("http", w.cluster, "internal.example.test"), nil, nil); err == nil || !strings.Contains(err.Error(), "reset") {
			t.Fatalf("got %d %v, want the connection reset", code, err)
		}
		if code, _, err := anyName.get(url("http", w.pypi, "pypi.example.test"), nil, nil); err != nil || code != 200 {
			t.Fatalf("pypi: got %d %v", code, err)
		}
		if n := len(w.cluster.requests()); n != 0 {
			t.Errorf("the cluster address got %d requests", n)
		}
	})
}

func TestPolicyChangeAppliesToOpenConnections(t *testing.T) {
	w := newWorld(t)
	p := w.sandbox("127.0.2.6", `{}`, nil)
	c, err := readBanner(p, w.other.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo: %q %v", line, err)
	}
	w.sandbox("127.0.2.6", `{"allow":["127.0.1.5"],"deny":["0.0.0.0/0"]}`, nil)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadString('\n'); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the open connection to a now-denied address: got %v, want it closed", err)
	}
	if c, err := readBanner(p, w.other.addr); err == nil {
		_ = c.Close()
		t.Fatal("a new connection to the now-denied address succeeded")
	}
	kept, err := readBanner(p, w.echo.addr)
	if err != nil {
		t.Fatalf("the still-allowed address: %v", err)
	}
	defer func() { _ = kept.Close() }()
	w.srv.Delete(p.src)
	_ = kept.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := kept.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("after Delete: got %v, want the connection closed", err)
	}
}
