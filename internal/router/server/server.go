// Package server runs the router's listeners (proxy over HTTP and HTTPS, metrics, health
// probes) and drains them on shutdown: /readyz fails first, then in-flight requests, upgraded
// connections included, get until the shutdown timeout to finish.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configures the listeners. An empty address turns that listener off.
type Options struct {
	HTTPAddr    string
	HTTPSAddr   string
	MetricsAddr string
	HealthAddr  string
	// E2BHTTPAddr and E2BHTTPSAddr serve E2B, the E2B front door's handler (HTTPS with TLS).
	E2BHTTPAddr, E2BHTTPSAddr string
	E2B                       http.Handler
	// TLS serves HTTPSAddr; required when it is set.
	TLS               *tls.Config
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// ShutdownDelay keeps serving after /readyz turns 503, so load balancers stop sending
	// new requests before the listeners close.
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	Gatherer        prometheus.Gatherer
	// MetricsFilter wraps /metrics (authentication and authorization); optional.
	MetricsFilter func(http.Handler) http.Handler
	// MetricsTLS serves MetricsAddr over TLS; optional.
	MetricsTLS *tls.Config
	// Ready is an extra readiness check (the Sandbox cache has synced); optional.
	Ready func() bool
	// ProxyConnContext is the proxy listeners' http.Server ConnContext (the port-forward
	// recognition remembers each connection there); optional.
	ProxyConnContext func(context.Context, net.Conn) context.Context
	Log              logr.Logger
}

// Server is the set of listeners.
type Server struct {
	opts      Options
	servers   map[string]*http.Server
	listeners map[string]net.Listener
	bound     atomic.Bool
	ready     atomic.Pointer[func() bool]
	draining  atomic.Bool
	active    sync.WaitGroup
}

// Listener names, for Addr.
const (
	ProxyHTTP  = "proxy-http"
	ProxyHTTPS = "proxy-https"
	Metrics    = "metrics"
	Health     = "health"
	E2BHTTP    = "e2b-http"
	E2BHTTPS   = "e2b-https"
)

// New builds the listeners around the proxy handler.
func New(opts Options, proxy http.Handler) *Server {
	s := &Server{opts: opts, servers: map[string]*http.Server{}, listeners: map[string]net.Listener{}}
	proxyMux := http.NewServeMux()
	proxyMux.HandleFunc("/healthz", healthz)
	proxyMux.Handle("/", s.track(proxy))
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", healthz)
	healthMux.HandleFunc("/readyz", s.readyz)
	metricsMux := http.NewServeMux()
	if opts.Gatherer != nil {
		h := promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})
		if opts.MetricsFilter != nil {
			h = opts.MetricsFilter(h)
		}
		metricsMux.Handle("/metrics", h)
	}
	addrs := map[string]string{ProxyHTTP: opts.HTTPAddr, ProxyHTTPS: opts.HTTPSAddr,
		Metrics: opts.MetricsAddr, Health: opts.HealthAddr}
	if opts.E2B != nil {
		addrs[E2BHTTP], addrs[E2BHTTPS] = opts.E2BHTTPAddr, opts.E2BHTTPSAddr
	}
	for name, addr := range addrs {
		if addr == "" {
			continue
		}
		var h http.Handler = proxyMux
		switch name {
		case Metrics:
			h = metricsMux
		case Health:
			h = healthMux
		case E2BHTTP, E2BHTTPS:
			h = s.track(opts.E2B)
		}
		s.servers[name] = &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: opts.ReadHeaderTimeout,
			IdleTimeout: opts.IdleTimeout, MaxHeaderBytes: opts.MaxHeaderBytes}
	}
	for _, name := range []string{ProxyHTTPS, E2BHTTPS} {
		if srv := s.servers[name]; srv != nil {
			srv.TLSConfig = opts.TLS
		}
	}
	for _, name := range []string{ProxyHTTP, ProxyHTTPS} {
		if srv := s.servers[name]; srv != nil {
			srv.ConnContext = opts.ProxyConnContext
		}
	}
	if srv := s.servers[Metrics]; srv != nil {
		srv.TLSConfig = opts.MetricsTLS
	}
	return s
}

// Listen binds every listener, or none: on a failure it closes what it bound.
func (s *Server) Listen() error {
	for name, srv := range s.servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("binding %s listener on %s: %w", name, srv.Addr, err)
		}
		if name == ProxyHTTPS || name == E2BHTTPS {
			if srv.TLSConfig == nil {
				_ = ln.Close()
				s.closeListeners()
				return errors.New("the HTTPS listener needs a TLS configuration; set --tls-cert-file and --tls-key-file")
			}
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		if name == Metrics && srv.TLSConfig != nil {
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		s.listeners[name] = ln
	}
	s.bound.Store(true)
	return nil
}

func (s *Server) closeListeners() {
	for name, ln := range s.listeners {
		_ = ln.Close()
		delete(s.listeners, name)
	}
}

// Addr is the bound address of a listener, or "" when it is off or not bound yet.
func (s *Server) Addr(name string) string {
	if ln := s.listeners[name]; ln != nil {
		return ln.Addr().String()
	}
	return ""
}

// Serve serves on the bound listeners until ctx ends, then drains. It returns the first
// listener error, else the shutdown error.
func (s *Server) Serve(ctx context.Context) error {
	errs := make(chan error, len(s.listeners))
	for name, ln := range s.listeners {
		go func() {
			if err := s.servers[name].Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errs:
	}
	return errors.Join(serveErr, s.drain())
}

func (s *Server) drain() error {
	s.draining.Store(true)
	s.opts.Log.Info("draining: /readyz now fails", "delay", s.opts.ShutdownDelay, "timeout", s.opts.ShutdownTimeout)
	if s.opts.ShutdownDelay > 0 {
		time.Sleep(s.opts.ShutdownDelay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	// Proxy listeners first: probes and metrics stay up while requests drain, so /readyz keeps
	// answering 503 and the drain stays observable.
	err := s.shutdown(ctx, ProxyHTTP, ProxyHTTPS, E2BHTTP, E2BHTTPS)
	// Shutdown does not wait for hijacked (upgraded) connections; their handlers are counted.
	done := make(chan struct{})
	go func() { s.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, errors.New("shutdown timeout passed with upgraded connections still open"))
	}
	return errors.Join(err, s.shutdown(ctx, Metrics, Health))
}

func (s *Server) shutdown(ctx context.Context, names ...string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		if srv := s.servers[name]; srv != nil {
			wg.Go(func() {
				if err := srv.Shutdown(ctx); err != nil {
					errs[i] = fmt.Errorf("shutting down %s listener: %w", name, err)
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Draining reports whether shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer s.active.Done()
		h.ServeHTTP(w, r)
	})
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.draining.Load():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case !s.bound.Load() || !s.extraReady():
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	default:
		_, _ = w.Write([]byte("ok"))
	}
}

// SetReady replaces the extra readiness check of Options.Ready.
func (s *Server) SetReady(f func() bool) { s.ready.Store(&f) }

func (s *Server) extraReady() bool {
	if f := s.ready.Load(); f != nil {
		return (*f)()
	}
	return s.opts.Ready == nil || s.opts.Ready()
}
