package standin

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options are what Run serves.
type Options struct {
	// Dir is the state directory: the CA, the hosts added at run time and the control socket.
	Dir string
	// Network is the stand-in's range (198.19.64.0/24 on the local cluster).
	Network netip.Prefix
	// Hosts are the names served from the start; hosts added later through the control socket
	// are kept in Dir and served again after a restart.
	Hosts []string
}

// The files of the state directory besides the CA.
const (
	controlSocket = "control.sock"
	hostsFile     = "hosts.json"
)

// ControlSocketPath is the control socket of the stand-in whose state directory is dir.
func ControlSocketPath(dir string) string { return filepath.Join(dir, controlSocket) }

// maxRequests bounds the request log: the oldest entries go first.
const maxRequests = 2000

// maxDownload bounds GET /bytes/N.
const maxDownload = 1 << 30

// Request is what a host saw of one request. Tests read it through Client.Requests; the sandbox
// that sent the request cannot.
type Request struct {
	Time   time.Time   `json:"time"`
	Host   string      `json:"host"`             // the stand-in host that served it
	Scheme string      `json:"scheme"`           // http or https
	SNI    string      `json:"sni,omitempty"`    // the TLS server name the client sent
	Remote string      `json:"remote"`           // the client's address as the host saw it
	Method string      `json:"method"`           // GET, POST, ...
	HostHd string      `json:"hostHeader"`       // the Host header
	Path   string      `json:"path"`             // the request URI
	Header http.Header `json:"header,omitempty"` // every request header
}

type server struct {
	dir string
	ca  *authority

	mu       sync.Mutex
	plan     Plan
	certs    map[string]*tls.Certificate
	requests []Request
	closers  []io.Closer
}

// Run serves the stand-in until ctx ends. It must run in a network namespace of its own; it
// configures that namespace's interfaces once Attach has linked it to the host.
func Run(ctx context.Context, opts Options) error {
	ca, err := ensureCA(opts.Dir)
	if err != nil {
		return err
	}
	names := append([]string(nil), opts.Hosts...)
	saved, err := readHosts(opts.Dir)
	if err != nil {
		return err
	}
	names = append(names, saved...)
	plan, err := NewPlan(opts.Network, names)
	if err != nil {
		return err
	}
	if err := waitInterface(ctx, innerInterface); err != nil {
		return err
	}
	if err := configureInside(plan); err != nil {
		return err
	}
	s := &server{dir: opts.Dir, ca: ca, plan: Plan{Network: plan.Network, Gateway: plan.Gateway, Resolver: plan.Resolver}, certs: map[string]*tls.Certificate{}}
	defer s.close()
	errc := make(chan error, 8)
	if err := s.serveDNS(plan.Resolver, errc); err != nil {
		return err
	}
	for _, h := range plan.Hosts {
		if _, err := s.addHost(h.Name); err != nil {
			return err
		}
	}
	if err := s.serveControl(errc); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// waitInterface waits until the namespace holds name: Attach creates it from the host.
func waitInterface(ctx context.Context, name string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := net.InterfaceByName(name); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interface %s never appeared in the stand-in's namespace (Attach links it from the host): %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// configureInside brings the namespace's interfaces up with the resolver's address and a
// default route through the host.
func configureInside(p Plan) error {
	bits := strconv.Itoa(p.Network.Bits())
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "replace", p.Resolver.String() + "/" + bits, "dev", innerInterface},
		{"link", "set", innerInterface, "up"},
		{"route", "replace", "default", "via", p.Gateway.String(), "dev", innerInterface},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	}
	return nil
}

// addHost plans name, gives the namespace its address, issues its certificate and serves HTTP
// and HTTPS there. A host already served is returned as it is.
func (s *server) addHost(name string) (Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.plan.Lookup(name); ok {
		return h, nil
	}
	next := s.plan
	next.Hosts = append([]Host(nil), s.plan.Hosts...)
	h, err := next.Add(name)
	if err != nil {
		return Host{}, err
	}
	if err := ip("addr", "replace", h.Addr.String()+"/"+strconv.Itoa(s.plan.Network.Bits()), "dev", innerInterface); err != nil {
		return Host{}, err
	}
	cert, err := s.ca.issue(h)
	if err != nil {
		return Host{}, err
	}
	plain, err := net.Listen("tcp", netip.AddrPortFrom(h.Addr, 80).String())
	if err != nil {
		return Host{}, err
	}
	secure, err := net.Listen("tcp", netip.AddrPortFrom(h.Addr, 443).String())
	if err != nil {
		plain.Close()
		return Host{}, err
	}
	s.plan, s.certs[h.Name] = next, cert
	handler := s.handler(h)
	for _, srv := range []struct {
		l   net.Listener
		tls bool
	}{{plain, false}, {secure, true}} {
		hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		if srv.tls {
			hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certificate(h)}
		}
		s.closers = append(s.closers, hs)
		go func(hs *http.Server, l net.Listener, secure bool) {
			if secure {
				_ = hs.ServeTLS(l, "", "")
			} else {
				_ = hs.Serve(l)
			}
		}(hs, srv.l, srv.tls)
	}
	return h, writeHosts(s.dir, s.plan.Hosts)
}

// certificate presents the certificate of the name the client asked for when the stand-in
// serves it, else the host's own: a client that sends another SNI sees a certificate that does
// not match it.
func (s *server) certificate(own Host) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if c, ok := s.certs[strings.ToLower(hello.ServerName)]; ok {
			return c, nil
		}
		return s.certs[own.Name], nil
	}
}

// handler serves one host: / greets, /echo returns what the host saw as JSON, /bytes/N sends N
// zero bytes (for downloads; ?rate=R paces them at R bytes a second). Every request is logged.
func (s *server) handler(h Host) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen(h, r))
	})
	mux.HandleFunc("/bytes/{n}", serveBytes)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", h.Name)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log(seen(h, r))
		w.Header().Set("X-Standin-Host", h.Name)
		mux.ServeHTTP(w, r)
	})
}

// paceChunk is the most a paced download writes at once.
const paceChunk = 64 << 10

// serveBytes sends N zero bytes with their Content-Length. With ?rate=R it sends them in chunks
// at R bytes a second, flushing each, so a test can act while a download is under way (kill
// something in its path) and watch the bytes arrive; it stops when the client goes away.
func serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 || n > maxDownload {
		http.Error(w, fmt.Sprintf("/bytes/N: N must be 0 to %d", maxDownload), http.StatusBadRequest)
		return
	}
	var rate int64
	if v := r.URL.Query().Get("rate"); v != "" {
		if rate, err = strconv.ParseInt(v, 10, 64); err != nil || rate < 1 || rate > maxDownload {
			http.Error(w, fmt.Sprintf("/bytes/N?rate=R: R is bytes a second, 1 to %d; got %q", maxDownload, v), http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if rate == 0 {
		_, _ = io.CopyN(w, zeros{}, n)
		return
	}
	chunk := min(paceChunk, max(rate/10, 1))
	tick := time.NewTicker(time.Duration(chunk * int64(time.Second) / rate))
	defer tick.Stop()
	rc := http.NewResponseController(w)
	for sent := int64(0); sent < n; {
		m := min(chunk, n-sent)
		if _, err := io.CopyN(w, zeros{}, m); err != nil {
			return
		}
		sent += m
		if rc.Flush() != nil || sent == n {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
	}
}

func seen(h Host, r *http.Request) Request {
	req := Request{Time: time.Now().UTC(), Host: h.Name, Scheme: "http", Remote: r.RemoteAddr, Method: r.Method, HostHd: r.Host, Path: r.RequestURI, Header: r.Header.Clone()}
	if r.TLS != nil {
		req.Scheme, req.SNI = "https", r.TLS.ServerName
	}
	return req
}

func (s *server) log(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == maxRequests {
		s.requests = append(s.requests[:0], s.requests[1:]...)
	}
	s.requests = append(s.requests, r)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// serveDNS answers on addr:53 over UDP and TCP.
func (s *server) serveDNS(addr netip.Addr, errc chan<- error) error {
	ap := netip.AddrPortFrom(addr, 53).String()
	pc, err := net.ListenPacket("udp", ap)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", ap)
	if err != nil {
		pc.Close()
		return err
	}
	s.closers = append(s.closers, pc, l)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				errc <- fmt.Errorf("DNS over UDP on %s: %w", ap, err)
				return
			}
			if resp := Answer(s.snapshot(), buf[:n]); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				errc <- fmt.Errorf("DNS over TCP on %s: %w", ap, err)
				return
			}
			go s.dnsConn(c)
		}
	}()
	return nil
}

// dnsConn answers the length-prefixed queries of one TCP connection.
func (s *server) dnsConn(c net.Conn) {
	defer c.Close()
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := Answer(s.snapshot(), q)
		if resp == nil {
			return
		}
		if err := binary.Write(c, binary.BigEndian, uint16(len(resp))); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func (s *server) snapshot() Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.plan
	p.Hosts = append([]Host(nil), s.plan.Hosts...)
	return p
}

// serveControl serves the control API on the socket in the state directory: GET /plan,
// POST /hosts {"name":...}, GET /requests?host=NAME, GET /healthz.
func (s *server) serveControl(errc chan<- error) error {
	path := ControlSocketPath(s.dir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /plan", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.snapshot()) })
	mux.HandleFunc("POST /hosts", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name string `json:"name"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil {
			http.Error(w, "body: want {\"name\": \"host.test\"}: "+err.Error(), http.StatusBadRequest)
			return
		}
		h, err := s.addHost(body.Name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, h)
	})
	mux.HandleFunc("GET /requests", func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.URL.Query().Get("host"))
		s.mu.Lock()
		var out []Request
		for _, req := range s.requests {
			if host == "" || req.Host == host {
				out = append(out, req)
			}
		}
		s.mu.Unlock()
		writeJSON(w, out)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.closers = append(s.closers, hs)
	go func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("control socket %s: %w", path, err)
		}
	}()
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *server) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		_ = c.Close()
	}
	_ = os.Remove(ControlSocketPath(s.dir))
}

// readHosts reads the names added at run time by an earlier run.
func readHosts(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, hostsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hosts []Host
	if err := json.Unmarshal(data, &hosts); err != nil {
		return nil, fmt.Errorf("%s: %w; remove it to start with the default hosts", filepath.Join(dir, hostsFile), err)
	}
	names := make([]string, 0, len(hosts))
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	return names, nil
}

func writeHosts(dir string, hosts []Host) error {
	data, err := json.MarshalIndent(hosts, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, hostsFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, hostsFile))
}
