// Package router assembles paddock-router from its parts: header parsing, authorization, target
// resolution from a Sandbox informer, the reverse proxy, and the listeners. main and the
// integration tests build it the same way, through New.
package router

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/clientpods"
	"github.com/paddock-dev/paddock/internal/router/e2b"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/metrics"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/internal/router/sandboxtoken"
	"github.com/paddock-dev/paddock/internal/router/scopedtoken"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/internal/router/tlsreload"
	"github.com/paddock-dev/paddock/internal/router/wake"
	"github.com/paddock-dev/paddock/internal/version"
)

// Authorization modes.
const (
	AuthzAllowAll    = "allow-all"
	AuthzTokenReview = "tokenreview"
	AuthzScopedToken = "scoped-token"
)

// Sandbox token sources.
const (
	TokensFromKey            = "key"
	TokensFromSandboxSecrets = "sandbox-secrets"
)

// Config is everything New needs. cmd/paddock-router fills it from flags.
type Config struct {
	Server server.Options
	// TLSCertFile and TLSKeyFile serve Server.HTTPSAddr and are reloaded when they change.
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile and MTLSMode ("off", "optional", "required") verify client certificates.
	TLSClientCAFile, MTLSMode string

	// Kube is the API server connection; required for the Sandbox cache, TokenReview and the
	// credentials key.
	Kube *rest.Config
	// SandboxCache resolves targets from an informer of Sandboxes, which is what limits the
	// router to Ready, claimed Sandboxes and their declared ports. Without it the router dials
	// <name>.<namespace>.svc.<ClusterDomain> like the upstream router, which InsecureDNSRouting
	// must acknowledge.
	SandboxCache       bool
	InsecureDNSRouting bool
	SandboxNamespaces  []string
	ClusterDomain      string
	// InjectSandboxToken replaces the client's Authorization with the sandbox's own token,
	// derived from the key in CredentialsSecret; it needs the Sandbox cache (for the UID). The
	// E2B front door derives the tokens it hands out from the same Secret.
	InjectSandboxToken bool
	CredentialsSecret  types.NamespacedName
	// SandboxTokenSource is where injected tokens come from: TokensFromKey (the default when
	// empty) derives them from CredentialsSecret; TokensFromSandboxSecrets reads each Sandbox's
	// own "<sandbox>-credentials" Secret in SandboxNamespaces, so the router never holds the key
	// (the per-namespace router, docs/compatibility.md).
	SandboxTokenSource string

	// AuthzMode is AuthzTokenReview when empty.
	AuthzMode string
	// AcceptPortForward serves proxy requests without a credential when they come through the
	// API server's port-forward to the router's Pod (authz.PortForward); the zero value does not.
	// No effect with AuthzAllowAll.
	AcceptPortForward bool
	// ClientPodLabels (UNSAFE, the migration profile) serves proxy requests without a credential
	// from running Pods with these labels in the namespace of the sandbox they name, recognised
	// by source address (clientpods); empty serves none. No effect with AuthzAllowAll.
	ClientPodLabels map[string]string
	TokenReview     authz.TokenReviewOptions
	ScopedTokenKeys string // path of the key file
	ProxyTimeout    time.Duration
	DialTimeout     time.Duration
	// UpstreamIdleConnsPerHost is the keep-alive connections kept to each sandbox; 0 means
	// proxy.DefaultIdleConnsPerHost.
	UpstreamIdleConnsPerHost int
	ResponseTimeout          time.Duration
	MaxRequestBody           int64
	Retry                    proxy.RetryPolicy
	AccessLog                bool
	Log                      logr.Logger
	// Tracer records a span per request and propagates W3C trace context upstream; optional.
	Tracer trace.Tracer

	// E2B turns on the E2B-compatible front door (internal/router/e2b) on Server.E2BHTTPAddr
	// and Server.E2BHTTPSAddr; optional.
	E2B *E2BConfig

	// MetricsSecure serves /metrics over TLS (a self-signed certificate) to callers the API
	// server authenticates and authorizes for get on the non-resource URL /metrics; it needs Kube.
	MetricsSecure bool

	// WakeOnRequest wakes a Sandbox the idle controller suspended when a request for it comes,
	// holding the request at most WakeTimeout; it needs the Sandbox cache.
	WakeOnRequest bool
	WakeTimeout   time.Duration

	// Policy relaxes the address checks. It exists for tests that run upstreams on 127.0.0.1;
	// no flag sets it.
	Policy headers.Policy
}

// E2BConfig configures the E2B front door; the router supplies its connection, address policy,
// transport, log and the sandbox tokens (from CredentialsSecret).
type E2BConfig struct {
	Domain        string
	KeysNamespace string
	CreateTimeout time.Duration
	// DaemonPort replaces the daemon's port 49983 upstream. Only tests set it; no flag does.
	DaemonPort int
}

// Router is a built router, ready to Listen and Serve.
type Router struct {
	cfg      Config
	srv      *server.Server
	cache    *resolve.Cache
	e2b      *e2b.FrontDoor
	tokens   *sandboxtoken.Source
	secrets  *sandboxtoken.SecretSource
	reloader *tlsreload.Reloader
	waker    *wake.Waker
	activity *wake.Reporter
	clients  *clientpods.Authorizer
	// Registry holds every metric the router exports.
	Registry *prometheus.Registry
}

// New builds the router. It reads key and certificate files but opens no port.
func New(cfg Config) (*Router, error) {
	r := &Router{cfg: cfg, Registry: prometheus.NewRegistry()}
	r.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(r.Registry)
	metrics.RegisterBuildInfo(r.Registry, version.Get())
	authorizer, err := newAuthorizer(cfg)
	if err != nil {
		return nil, err
	}
	var connContext func(context.Context, net.Conn) context.Context
	if len(cfg.ClientPodLabels) > 0 && cfg.AuthzMode != AuthzAllowAll {
		if r.clients, err = clientpods.New(cfg.Kube, cfg.ClientPodLabels, cfg.SandboxNamespaces, authorizer); err != nil {
			return nil, err
		}
		cfg.Log.Info("WARNING: --unauthenticated-client-pod-labels: Pods with these labels reach every sandbox of their namespace without a token, recognised by their address only (the upstream-unauthenticated-migration profile)", "labels", cfg.ClientPodLabels)
		authorizer = r.clients
	}
	if cfg.AcceptPortForward && cfg.AuthzMode != AuthzAllowAll {
		pf := &authz.PortForward{Next: authorizer}
		authorizer, connContext = pf, pf.Recognizer.ConnContext
	}
	resolver := &resolve.Resolver{ClusterDomain: cfg.ClusterDomain, Policy: cfg.Policy}
	switch {
	case cfg.SandboxCache:
		if r.cache, err = resolve.NewCache(cfg.Kube, cfg.SandboxNamespaces); err != nil {
			return nil, err
		}
		resolver.Lookup = r.cache
	case !cfg.InsecureDNSRouting:
		return nil, errors.New("without the Sandbox cache the router would dial any <name>.<namespace>.svc name on any port; keep --sandbox-cache=true or acknowledge with --insecure-dns-routing")
	default:
		cfg.Log.Info("WARNING: --insecure-dns-routing: requests are routed by DNS name without checking that the target is a Ready, claimed Sandbox or that the port is declared")
	}
	if cfg.InjectSandboxToken && !cfg.SandboxCache {
		return nil, errors.New("--inject-sandbox-token needs --sandbox-cache=true (the token derives from the Sandbox's UID); set --inject-sandbox-token=false with --insecure-dns-routing")
	}
	creds, err := r.newCredentials(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Server.HTTPSAddr != "" || cfg.Server.E2BHTTPSAddr != "" {
		if r.reloader, err = tlsreload.New(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Log.WithName("tls")); err != nil {
			return nil, err
		}
		r.reloader.OnReload = func(err error) {
			m.CertReloads.WithLabelValues(map[bool]string{true: "success", false: "failure"}[err == nil]).Inc()
		}
		if cfg.Server.TLS, err = serverTLS(cfg, r.reloader); err != nil {
			return nil, err
		}
	}
	if cfg.SandboxCache {
		patcher, err := wake.NewKubePatcher(cfg.Kube)
		if err != nil {
			return nil, fmt.Errorf("creating the Kubernetes client for waking sandboxes: %w", err)
		}
		r.activity = wake.NewReporter(r.cache, patcher, clock.RealClock{}, cfg.Log.WithName("activity"))
		if cfg.WakeOnRequest {
			timeout := cfg.WakeTimeout
			if timeout <= 0 {
				timeout = wake.DefaultTimeout
			}
			r.waker = wake.NewWaker(r.cache, patcher, cfg.Policy, timeout, m)
		}
	}
	transport := proxy.NewTransport(cfg.Policy, cfg.DialTimeout, cfg.ResponseTimeout, cfg.UpstreamIdleConnsPerHost)
	handler := proxy.New(proxy.Config{
		Resolver: resolver, Authorizer: authorizer, Metrics: m, Log: cfg.Log.WithName("proxy"),
		AccessLog: cfg.AccessLog, ProxyTimeout: cfg.ProxyTimeout, MaxRequestBodyBytes: cfg.MaxRequestBody,
		Retry: cfg.Retry, Tracer: cfg.Tracer, Credentials: creds, Waker: r.waker, Activity: r.activity,
		Transport: transport,
	})
	opts := cfg.Server
	opts.ProxyConnContext = connContext
	if e := cfg.E2B; e != nil {
		if r.e2b, err = e2b.New(e2b.Config{Kube: cfg.Kube, Domain: e.Domain, KeysNamespace: e.KeysNamespace,
			Tokens: r.tokens, CreateTimeout: e.CreateTimeout, Policy: cfg.Policy,
			Transport: transport, DaemonPort: e.DaemonPort, Log: cfg.Log.WithName("e2b"), Registry: r.Registry,
			Activity: r.activity, Waker: r.waker}); err != nil {
			return nil, err
		}
		opts.E2B = r.e2b
	}
	if cfg.MetricsSecure && opts.MetricsAddr != "" {
		if opts.MetricsFilter, opts.MetricsTLS, err = secureMetrics(cfg); err != nil {
			return nil, err
		}
	}
	opts.Gatherer = r.Registry
	opts.Log = cfg.Log.WithName("server")
	r.srv = server.New(opts, handler)
	return r, nil
}

// newCredentials builds the token sources: the key watch when tokens derive from the key or the
// E2B front door is on (it hands each sandbox's token to the SDK, so it needs the key even when
// the proxy does not inject tokens), the per-Sandbox Secret watch otherwise. It returns what the
// proxy injects, nil when it injects nothing.
func (r *Router) newCredentials(cfg Config) (proxy.Credentials, error) {
	fromSecrets := cfg.SandboxTokenSource == TokensFromSandboxSecrets
	switch cfg.SandboxTokenSource {
	case "", TokensFromKey, TokensFromSandboxSecrets:
	default:
		return nil, fmt.Errorf("unknown sandbox token source %q; use %s or %s", cfg.SandboxTokenSource, TokensFromKey, TokensFromSandboxSecrets)
	}
	if fromSecrets && cfg.E2B != nil {
		return nil, fmt.Errorf("the E2B front door derives tokens from the credentials key; it cannot run with sandbox token source %s", TokensFromSandboxSecrets)
	}
	if !cfg.InjectSandboxToken && cfg.E2B == nil {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(cfg.Kube)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client for sandbox tokens: %w", err)
	}
	if fromSecrets {
		if r.secrets, err = sandboxtoken.NewSecretSource(cs, cfg.SandboxNamespaces); err != nil {
			return nil, err
		}
		return r.secrets, nil
	}
	r.tokens = sandboxtoken.New(cs, cfg.CredentialsSecret)
	if !cfg.InjectSandboxToken {
		return nil, nil
	}
	return r.tokens, nil
}

// secureMetrics builds the authentication and authorization filter of /metrics (TokenReview and
// SubjectAccessReview, as the controller does) and a self-signed serving certificate.
func secureMetrics(cfg Config) (func(http.Handler) http.Handler, *tls.Config, error) {
	if cfg.Kube == nil {
		return nil, nil, errors.New("--metrics-secure needs an API server connection to review callers; set --kubeconfig, run in a pod, or pass --metrics-secure=false (UNSAFE)")
	}
	httpClient, err := rest.HTTPClientFor(cfg.Kube)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-secure: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg.Kube, httpClient)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-secure: %w", err)
	}
	log := cfg.Log.WithName("metrics")
	wrap := func(h http.Handler) http.Handler {
		filtered, err := filter(log, h)
		if err != nil {
			// The filter fails only on construction; refuse every request rather than serve openly.
			log.Error(err, "building the /metrics filter; /metrics answers 500")
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "metrics authorization is not available", http.StatusInternalServerError)
			})
		}
		return filtered
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("paddock-router-metrics", nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-secure: generating the serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-secure: %w", err)
	}
	return wrap, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

func serverTLS(cfg Config, reloader *tlsreload.Reloader) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: reloader.GetCertificate}
	if cfg.MTLSMode == "" || cfg.MTLSMode == "off" {
		return c, nil
	}
	pem, err := os.ReadFile(cfg.TLSClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("reading --tls-client-ca-file: %w", err)
	}
	c.ClientCAs = x509.NewCertPool()
	if !c.ClientCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-client-ca-file %s holds no PEM certificate", cfg.TLSClientCAFile)
	}
	c.ClientAuth = tls.VerifyClientCertIfGiven
	if cfg.MTLSMode == "required" {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

func newAuthorizer(cfg Config) (authz.Authorizer, error) {
	switch cfg.AuthzMode {
	case AuthzAllowAll:
		cfg.Log.Info("WARNING: --authz-mode=allow-all: every request is served without authentication; anyone who reaches the router reaches every claimed sandbox. For local development only")
		return authz.AllowAll{}, nil
	case AuthzTokenReview, "":
		cs, err := kubernetes.NewForConfig(cfg.Kube)
		if err != nil {
			return nil, fmt.Errorf("creating the Kubernetes client for TokenReview: %w", err)
		}
		return authz.NewTokenReview(cs, cfg.TokenReview), nil
	case AuthzScopedToken:
		data, err := os.ReadFile(cfg.ScopedTokenKeys)
		if err != nil {
			return nil, fmt.Errorf("reading the scoped-token key file (--authz-scoped-token-secret-file): %w", err)
		}
		keys, err := scopedtoken.ParseKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.ScopedTokenKeys, err)
		}
		return &authz.Scoped{Keys: keys}, nil
	}
	return nil, fmt.Errorf("unknown authorization mode %q; use %s, %s or %s", cfg.AuthzMode, AuthzAllowAll, AuthzTokenReview, AuthzScopedToken)
}

// Listen binds every listener.
func (r *Router) Listen() error { return r.srv.Listen() }

// Addr is the bound address of a listener (server.ProxyHTTP, ...).
func (r *Router) Addr(name string) string { return r.srv.Addr(name) }

// Serve runs the Sandbox cache, certificate reloads and the listeners until ctx ends, then
// drains. /readyz reports ready once the listeners are bound and the Sandbox cache and the
// credentials key watch have synced (the key need not exist yet).
func (r *Router) Serve(ctx context.Context) error {
	bg, stop := context.WithCancel(context.Background())
	defer stop()
	var cacheErr = make(chan error, 1)
	var e2bErr = make(chan error, 1)
	var syncs []func(context.Context) bool
	if r.cache != nil {
		go func() { cacheErr <- r.cache.Start(bg) }()
		syncs = append(syncs, r.cache.WaitForSync)
	}
	if r.activity != nil {
		go r.activity.Run(bg)
	}
	if r.tokens != nil {
		go r.tokens.Run(bg)
		syncs = append(syncs, r.tokens.WaitForSync)
	}
	if r.secrets != nil {
		go r.secrets.Run(bg)
		syncs = append(syncs, r.secrets.WaitForSync)
	}
	if r.clients != nil {
		go func() { _ = r.clients.Start(bg) }()
		syncs = append(syncs, r.clients.WaitForSync)
	}
	if r.e2b != nil {
		go func() { e2bErr <- r.e2b.Start(bg) }()
		syncs = append(syncs, r.e2b.WaitForSync)
	}
	if len(syncs) > 0 {
		synced := make(chan struct{})
		go func() {
			for _, wait := range syncs {
				if !wait(bg) {
					return
				}
			}
			close(synced)
		}()
		r.srv.SetReady(func() bool {
			select {
			case <-synced:
				return true
			default:
				return false
			}
		})
	}
	if r.reloader != nil {
		if _, err := r.reloader.Start(bg); err != nil {
			return err
		}
	}
	err := r.srv.Serve(ctx)
	stop()
	if r.cache != nil {
		if cerr := <-cacheErr; cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("sandbox cache: %w", cerr))
		}
	}
	if r.e2b != nil {
		if cerr := <-e2bErr; cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("E2B front door cache: %w", cerr))
		}
	}
	return err
}

// Waker is the router's wake path, for other front doors in the same process (E2B connect and
// autoResume); nil when --wake-on-request is off or there is no Sandbox cache.
func (r *Router) Waker() *wake.Waker { return r.waker }

// Activity is the router's activity reporter (nil without the Sandbox cache); its Flush lets
// tests write what it has seen without waiting for the minute's tick.
func (r *Router) Activity() *wake.Reporter { return r.activity }

// Draining reports whether shutdown has begun.
func (r *Router) Draining() bool { return r.srv.Draining() }
