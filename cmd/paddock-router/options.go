package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	"github.com/paddock-dev/paddock/internal/router/server"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// Options are the command-line options. Flag names follow the upstream Go router so its
// deployment arguments carry over; flags it does not have are marked "paddock" in their help.
type Options struct {
	HTTPAddr, HTTPSAddr, MetricsAddr, HealthAddr string
	// MetricsSecure serves /metrics over HTTPS to reviewed callers only.
	MetricsSecure                            bool
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	MTLSMode                                 string
	ClusterDomain                            string
	ProxyTimeout, ResponseHeaderTimeout      time.Duration
	DialTimeout                              time.Duration
	ShutdownTimeout, ShutdownDelay           time.Duration
	MaxRequestBodyBytes                      int64
	MaxHeaderBytes                           int
	Retries                                  int
	UpstreamIdleConnsPerHost                 int
	RetryInitialDelay, RetryMaxDelay         time.Duration
	AuthzMode                                string
	TokenReviewTTL                           time.Duration
	TokenReviewCacheSize                     int
	TokenReviewRequireToken                  bool
	TokenReviewCheckAccess                   bool
	TokenReviewAudiences                     string
	ScopedTokenSecretFile                    string
	SandboxCache                             bool
	InsecureDNSRouting                       bool
	InjectSandboxToken                       bool
	WakeOnRequest                            bool
	WakeTimeout                              time.Duration
	CredentialsSecret                        string
	SandboxTokenSource                       string
	SandboxNamespaces                        string
	Kubeconfig                               string
	AccessLog                                bool
	EnableTracing                            bool
	ConfigFile                               string
	Version                                  bool
	E2BAddr, E2BHTTPSAddr                    string
	E2BDomain                                string
	E2BAPIKeyNamespace                       string
	E2BCreateTimeout                         time.Duration
	AcceptPortForward                        bool
	// UnauthenticatedClientPodLabels is UNSAFE: the migration profile's, as k=v[,k=v].
	UnauthenticatedClientPodLabels string

	// podIP and hostIP come from the downward API (env POD_IP, HOST_IP); equal, they mean
	// hostNetwork, where loopback is the node's.
	podIP, hostIP string
}

// defaultOptions applies the built-in defaults, then the CLUSTER_DOMAIN and
// PROXY_TIMEOUT_SECONDS environment variables (invalid values are ignored, as upstream does).
func defaultOptions() *Options {
	o := &Options{
		HTTPAddr: ":8080", MetricsAddr: ":9090", HealthAddr: ":8081", MTLSMode: "off", MetricsSecure: true,
		ClusterDomain: "cluster.local", ProxyTimeout: 180 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
		DialTimeout: 30 * time.Second, ShutdownTimeout: 30 * time.Second, ShutdownDelay: 5 * time.Second,
		MaxHeaderBytes: 64 << 10, Retries: 3, UpstreamIdleConnsPerHost: proxy.DefaultIdleConnsPerHost, RetryInitialDelay: 200 * time.Millisecond, RetryMaxDelay: 800 * time.Millisecond,
		AuthzMode: router.AuthzTokenReview, TokenReviewTTL: 30 * time.Second, TokenReviewCacheSize: 2048,
		TokenReviewRequireToken: true, TokenReviewCheckAccess: true,
		SandboxCache: true, InjectSandboxToken: true, AccessLog: true, WakeOnRequest: true, WakeTimeout: wake.DefaultTimeout,
		CredentialsSecret: ownNamespace() + "/" + credentials.KeySecretName, SandboxTokenSource: router.TokensFromKey,
		E2BAPIKeyNamespace: e2b.DefaultAPIKeyNamespace, E2BCreateTimeout: 60 * time.Second,
		AcceptPortForward: true, podIP: os.Getenv("POD_IP"), hostIP: os.Getenv("HOST_IP"),
	}
	if v := os.Getenv("CLUSTER_DOMAIN"); v != "" {
		o.ClusterDomain = v
	}
	if s, err := strconv.ParseFloat(os.Getenv("PROXY_TIMEOUT_SECONDS"), 64); err == nil && s > 0 {
		o.ProxyTimeout = time.Duration(s * float64(time.Second))
	}
	return o
}

// ownNamespace is the namespace the router runs in: POD_NAMESPACE, else the service account's,
// else paddock-system (where the bundles install it). The controller keeps the credentials key
// in its own namespace, which the bundles make the same.
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "paddock-system"
}

// tracingFlag is named by parse, which turns tracing on from the environment when the flag is
// not given.
const tracingFlag = "enable-tracing"

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.HTTPAddr, "http-bind-address", o.HTTPAddr, "Proxy listener over HTTP; empty turns it off.")
	fs.StringVar(&o.HTTPSAddr, "https-bind-address", o.HTTPSAddr, "Proxy listener over HTTPS; needs --tls-cert-file and --tls-key-file.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Prometheus /metrics listener; empty turns it off.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS to callers with get on the non-resource URL /metrics (ClusterRole paddock-metrics-reader), checked with TokenReview and SubjectAccessReview; false (UNSAFE) serves every caller over plain HTTP.")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", o.HealthAddr, "/healthz and /readyz listener; empty turns it off.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM certificate for HTTPS, reloaded when it changes.")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "PEM key for HTTPS, reloaded when it changes.")
	fs.StringVar(&o.TLSClientCAFile, "tls-client-ca-file", o.TLSClientCAFile, "PEM bundle of CAs for client certificates (mTLS).")
	fs.StringVar(&o.MTLSMode, "mtls-mode", o.MTLSMode, "Client certificates: off, optional or required.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "Cluster DNS domain, for DNS-form targets.")
	fs.DurationVar(&o.ProxyTimeout, "proxy-timeout", o.ProxyTimeout, "Bound on one proxied request (not upgraded connections); a shorter X-Sandbox-Timeout wins.")
	fs.DurationVar(&o.ResponseHeaderTimeout, "response-header-timeout", o.ResponseHeaderTimeout, "Bound on waiting for the upstream's response headers.")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Bound on connecting to an upstream (paddock).")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "Bound on draining in-flight requests at shutdown.")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "Time to keep serving after /readyz turns 503 at shutdown, so endpoints update first (paddock).")
	fs.Int64Var(&o.MaxRequestBodyBytes, "max-request-body-bytes", o.MaxRequestBodyBytes, "Refuse larger request bodies with 413; 0 means no limit.")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", o.MaxHeaderBytes, "Refuse requests whose headers are larger with 431 (paddock).")
	fs.IntVar(&o.Retries, "upstream-max-retries", o.Retries, "Retries of an idempotent, bodiless request whose connection attempt failed.")
	fs.IntVar(&o.UpstreamIdleConnsPerHost, "upstream-max-idle-conns-per-host", o.UpstreamIdleConnsPerHost,
		"Idle keep-alive connections kept to each sandbox; more concurrent requests to one sandbox than this open and close a connection each (paddock).")
	fs.DurationVar(&o.RetryInitialDelay, "upstream-retry-initial-delay", o.RetryInitialDelay, "First retry delay; doubles each retry.")
	fs.DurationVar(&o.RetryMaxDelay, "upstream-retry-max-delay", o.RetryMaxDelay, "Longest retry delay.")
	fs.StringVar(&o.AuthzMode, "authz-mode", o.AuthzMode, "tokenreview (Kubernetes tokens, checked per sandbox), scoped-token, or allow-all (no authentication at all; local development only).")
	fs.DurationVar(&o.TokenReviewTTL, "authz-tokenreview-ttl", o.TokenReviewTTL, "How long a TokenReview or SubjectAccessReview result is cached.")
	fs.IntVar(&o.TokenReviewCacheSize, "authz-tokenreview-cache-size", o.TokenReviewCacheSize, "Entries in the review cache.")
	fs.BoolVar(&o.TokenReviewRequireToken, "authz-tokenreview-require-token", o.TokenReviewRequireToken, "Refuse requests without a Bearer token; always true in tokenreview mode (false is refused: use --authz-mode=allow-all for development).")
	fs.BoolVar(&o.TokenReviewCheckAccess, "authz-tokenreview-check-access", o.TokenReviewCheckAccess, "Also require create on sandboxes/proxy for the named sandbox via SubjectAccessReview; false lets any authenticated identity reach every sandbox (paddock).")
	fs.BoolVar(&o.AcceptPortForward, "accept-port-forward", o.AcceptPortForward, "Serve proxy requests that carry no Authorization when they come through the API server's port-forward to this Pod "+
		"(kubectl port-forward, upstream's SDK tunnels): the API server authenticated the caller and checked create on pods/portforward. Whoever may port-forward to the router reaches every sandbox it serves (paddock).")
	fs.StringVar(&o.UnauthenticatedClientPodLabels, "unauthenticated-client-pod-labels", o.UnauthenticatedClientPodLabels, "UNSAFE: serve proxy requests that carry no Authorization from running Pods with these labels (k=v[,k=v]) "+
		"in the namespace of the sandbox they name, recognised by their source address as NetworkPolicy does; for the upstream-unauthenticated-migration profile. Empty serves none (paddock).")
	fs.StringVar(&o.TokenReviewAudiences, "authz-tokenreview-audiences", o.TokenReviewAudiences, "Comma-separated audiences the token must carry.")
	fs.StringVar(&o.ScopedTokenSecretFile, "authz-scoped-token-secret-file", o.ScopedTokenSecretFile, "Key file for scoped tokens: one key of at least 32 bytes per line, the first signs.")
	fs.BoolVar(&o.SandboxCache, "sandbox-cache", o.SandboxCache, "Resolve sandboxes from a Sandbox informer, which limits the router to Ready, claimed Sandboxes and their declared ports (paddock); false dials <name>.<namespace>.svc.<cluster-domain> and needs --insecure-dns-routing.")
	fs.BoolVar(&o.InsecureDNSRouting, "insecure-dns-routing", o.InsecureDNSRouting, "Allow --sandbox-cache=false: route by DNS name to any Service on any port, as upstream does, without checking the Sandbox (paddock).")
	fs.BoolVar(&o.WakeOnRequest, "wake-on-request", o.WakeOnRequest, "Wake a Sandbox the idle controller suspended (paddock.dev/suspend-reason: Idle) when an authorized request for it comes, and hold the request until it serves; a manual suspension is never woken (paddock).")
	fs.DurationVar(&o.WakeTimeout, "wake-timeout", o.WakeTimeout, "Longest a request is held while its Sandbox wakes; then 503 with Retry-After (paddock).")
	fs.BoolVar(&o.InjectSandboxToken, "inject-sandbox-token", o.InjectSandboxToken, "Replace the client's Authorization with \"Bearer <sandbox token>\" derived from --credentials-secret, so a sandboxd that requires its token answers (paddock).")
	fs.StringVar(&o.CredentialsSecret, "credentials-secret", o.CredentialsSecret, "namespace/name of the credentials key Secret the controller creates; the router watches it (paddock).")
	fs.StringVar(&o.SandboxTokenSource, "sandbox-token-source", o.SandboxTokenSource, "Where injected sandbox tokens come from: "+router.TokensFromKey+
		" derives them from --credentials-secret; "+router.TokensFromSandboxSecrets+" reads each Sandbox's own <sandbox>-credentials Secret in --sandbox-namespaces, "+
		"so the router never holds the installation's key (the per-namespace router) (paddock).")
	fs.BoolVar(&o.SandboxCache, "cache-enabled", o.SandboxCache, "Alias of --sandbox-cache, for upstream deployment arguments.")
	fs.StringVar(&o.SandboxNamespaces, "sandbox-namespaces", o.SandboxNamespaces, "Comma-separated namespaces to watch; empty watches all (paddock).")
	fs.StringVar(&o.SandboxNamespaces, "cache-namespace", o.SandboxNamespaces, "Alias of --sandbox-namespaces, for upstream deployment arguments.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig path; empty uses KUBECONFIG, in-cluster, then ~/.kube/config.")
	fs.BoolVar(&o.AccessLog, "access-log", o.AccessLog, "Log one line per proxied request.")
	fs.BoolVar(&o.EnableTracing, tracingFlag, o.EnableTracing, "Export a span per request over OTLP/gRPC (OTEL_EXPORTER_OTLP_* variables) and send W3C traceparent upstream; "+
		"on by default when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "YAML file of flag-name: value pairs; flags given on the command line win. Also SANDBOX_ROUTER_CONFIG.")
	fs.BoolVar(&o.Version, "version", o.Version, "Print the version and exit.")
	fs.StringVar(&o.E2BAddr, "e2b-bind-address", o.E2BAddr, "E2B-compatible API and data plane over HTTP (E2B_API_URL and E2B_SANDBOX_URL); empty turns it off (paddock).")
	fs.StringVar(&o.E2BHTTPSAddr, "e2b-https-bind-address", o.E2BHTTPSAddr, "E2B-compatible API and data plane over HTTPS, with --tls-cert-file and --tls-key-file (paddock).")
	fs.StringVar(&o.E2BDomain, "e2b-domain", o.E2BDomain, "Domain of E2B sandbox hosts {port}-{id}.<domain>, returned to the SDK as the sandbox's domain (paddock).")
	fs.StringVar(&o.E2BAPIKeyNamespace, "e2b-api-key-namespace", o.E2BAPIKeyNamespace, "Namespace of the E2B API-key Secrets (label "+e2b.APIKeyNamespaceLabel+"=<namespace the key may use>) (paddock).")
	fs.DurationVar(&o.E2BCreateTimeout, "e2b-create-timeout", o.E2BCreateTimeout, "Bound on an E2B create or connect waiting for the sandbox's daemon (paddock).")
}

// Validate reports every invalid option, naming the flag and the fix.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.HTTPAddr == "" && o.HTTPSAddr == "" {
		bad("--http-bind-address and --https-bind-address are both empty; set at least one")
	}
	if o.HTTPSAddr != "" && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		bad("--https-bind-address needs --tls-cert-file and --tls-key-file")
	}
	switch o.MTLSMode {
	case "off":
	case "optional", "required":
		if o.HTTPSAddr == "" || o.TLSClientCAFile == "" {
			bad("--mtls-mode=%s needs --https-bind-address and --tls-client-ca-file", o.MTLSMode)
		}
	default:
		bad("--mtls-mode=%q is not one of off, optional, required", o.MTLSMode)
	}
	if o.ClusterDomain == "" {
		bad("--cluster-domain is empty; the usual value is cluster.local")
	}
	for name, d := range map[string]time.Duration{"--proxy-timeout": o.ProxyTimeout,
		"--response-header-timeout": o.ResponseHeaderTimeout, "--dial-timeout": o.DialTimeout,
		"--authz-tokenreview-ttl": o.TokenReviewTTL, "--wake-timeout": o.WakeTimeout} {
		if d <= 0 {
			bad("%s=%s must be positive", name, d)
		}
	}
	for name, d := range map[string]time.Duration{"--shutdown-timeout": o.ShutdownTimeout, "--shutdown-delay": o.ShutdownDelay,
		"--upstream-retry-initial-delay": o.RetryInitialDelay, "--upstream-retry-max-delay": o.RetryMaxDelay} {
		if d < 0 {
			bad("%s=%s must not be negative", name, d)
		}
	}
	if o.MaxRequestBodyBytes < 0 {
		bad("--max-request-body-bytes=%d must not be negative (0 means no limit)", o.MaxRequestBodyBytes)
	}
	if o.MaxHeaderBytes < 4096 {
		bad("--max-header-bytes=%d is below 4096; clients' ordinary headers would be refused", o.MaxHeaderBytes)
	}
	if o.UpstreamIdleConnsPerHost < 1 {
		bad("--upstream-max-idle-conns-per-host=%d must be at least 1", o.UpstreamIdleConnsPerHost)
	}
	if o.Retries < 0 {
		bad("--upstream-max-retries=%d must not be negative", o.Retries)
	}
	if o.TokenReviewCacheSize <= 0 {
		bad("--authz-tokenreview-cache-size=%d must be positive", o.TokenReviewCacheSize)
	}
	switch o.AuthzMode {
	case router.AuthzAllowAll:
	case router.AuthzTokenReview:
		if !o.TokenReviewRequireToken {
			bad("--authz-tokenreview-require-token=false is refused: tokenreview always authenticates; for an open router use --authz-mode=allow-all (development only)")
		}
	case router.AuthzScopedToken:
		if o.ScopedTokenSecretFile == "" {
			bad("--authz-mode=scoped-token needs --authz-scoped-token-secret-file")
		}
	default:
		bad("--authz-mode=%q is not one of allow-all, tokenreview, scoped-token", o.AuthzMode)
	}
	if o.AcceptPortForward && o.podIP != "" && o.podIP == o.hostIP {
		bad("--accept-port-forward with hostNetwork (POD_IP %s is the node's address): loopback is the node's, not the Pod's; run the router without hostNetwork or set --accept-port-forward=false", o.podIP)
	}
	if _, err := o.clientPodLabels(); err != nil {
		errs = append(errs, err)
	} else if o.UnauthenticatedClientPodLabels != "" && o.AuthzMode == router.AuthzAllowAll {
		bad("--unauthenticated-client-pod-labels has no effect with --authz-mode=allow-all, which serves everybody; drop one of the two")
	}
	if !o.SandboxCache && !o.InsecureDNSRouting {
		bad("--sandbox-cache=false routes to any <name>.<namespace>.svc name on any port; keep the cache or add --insecure-dns-routing")
	}
	if o.InjectSandboxToken && !o.SandboxCache {
		bad("--inject-sandbox-token needs --sandbox-cache=true (the token derives from the Sandbox's UID); set --inject-sandbox-token=false")
	}
	switch o.SandboxTokenSource {
	case router.TokensFromKey:
		if o.InjectSandboxToken || o.e2bOn() {
			if _, err := o.credentialsSecret(); err != nil {
				errs = append(errs, err)
			}
		}
	case router.TokensFromSandboxSecrets:
		if len(splitCSV(o.SandboxNamespaces)) == 0 {
			bad("--sandbox-token-source=%s needs --sandbox-namespaces: the router reads Secrets only in the namespaces it serves", router.TokensFromSandboxSecrets)
		}
		if o.e2bOn() {
			bad("--e2b-bind-address and --e2b-https-bind-address need --sandbox-token-source=%s (the E2B front door derives tokens from the key); leave them empty", router.TokensFromKey)
		}
	default:
		bad("--sandbox-token-source=%q is not one of %s, %s", o.SandboxTokenSource, router.TokensFromKey, router.TokensFromSandboxSecrets)
	}
	if o.e2bOn() {
		if o.E2BHTTPSAddr != "" && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
			bad("--e2b-https-bind-address needs --tls-cert-file and --tls-key-file")
		}
		if o.E2BAPIKeyNamespace == "" {
			bad("--e2b-api-key-namespace is empty; name the namespace of the API-key Secrets")
		}
		if o.E2BCreateTimeout <= 0 {
			bad("--e2b-create-timeout=%s must be positive", o.E2BCreateTimeout)
		}
	}
	return errors.Join(errs...)
}

// clientPodLabels parses --unauthenticated-client-pod-labels (nil when empty).
func (o *Options) clientPodLabels() (map[string]string, error) {
	if strings.TrimSpace(o.UnauthenticatedClientPodLabels) == "" {
		return nil, nil
	}
	m, err := labels.ConvertSelectorToLabelsMap(o.UnauthenticatedClientPodLabels)
	if err != nil {
		return nil, fmt.Errorf("--unauthenticated-client-pod-labels=%q is not k=v[,k=v] (for example paddock.dev/sandbox-client=true): %w", o.UnauthenticatedClientPodLabels, err)
	}
	return m, nil
}

func (o *Options) credentialsSecret() (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(o.CredentialsSecret, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--credentials-secret=%q is not namespace/name; the usual value is paddock-system/%s", o.CredentialsSecret, credentials.KeySecretName)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// e2bOn reports whether a listener of the E2B front door is configured.
func (o *Options) e2bOn() bool { return o.E2BAddr != "" || o.E2BHTTPSAddr != "" }

// NeedsKube reports whether the options need an API server connection.
func (o *Options) NeedsKube() bool {
	return o.SandboxCache || o.InjectSandboxToken || o.AuthzMode == router.AuthzTokenReview || (o.MetricsSecure && o.MetricsAddr != "") || o.e2bOn() || o.UnauthenticatedClientPodLabels != ""
}

// Config turns validated options into the router's configuration.
func (o *Options) Config() router.Config {
	retryInitial, retryMax := o.RetryInitialDelay, o.RetryMaxDelay
	if retryInitial == 0 {
		retryInitial = 200 * time.Millisecond
	}
	if retryMax == 0 {
		retryMax = 800 * time.Millisecond
	}
	var e2bConfig *router.E2BConfig
	if o.e2bOn() {
		e2bConfig = &router.E2BConfig{Domain: o.E2BDomain, KeysNamespace: o.E2BAPIKeyNamespace, CreateTimeout: o.E2BCreateTimeout}
	}
	secret, _ := o.credentialsSecret()
	clients, _ := o.clientPodLabels()
	return router.Config{
		ClientPodLabels: clients,
		E2B:             e2bConfig,
		Server: server.Options{HTTPAddr: o.HTTPAddr, HTTPSAddr: o.HTTPSAddr, MetricsAddr: o.MetricsAddr,
			E2BHTTPAddr: o.E2BAddr, E2BHTTPSAddr: o.E2BHTTPSAddr,
			HealthAddr: o.HealthAddr, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
			MaxHeaderBytes: o.MaxHeaderBytes, ShutdownDelay: o.ShutdownDelay, ShutdownTimeout: o.ShutdownTimeout},
		TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSKeyFile, TLSClientCAFile: o.TLSClientCAFile, MTLSMode: o.MTLSMode,
		SandboxCache: o.SandboxCache, SandboxNamespaces: splitCSV(o.SandboxNamespaces), ClusterDomain: o.ClusterDomain,
		AuthzMode: o.AuthzMode, AcceptPortForward: o.AcceptPortForward, MetricsSecure: o.MetricsSecure,
		InsecureDNSRouting: o.InsecureDNSRouting, InjectSandboxToken: o.InjectSandboxToken, CredentialsSecret: secret,
		SandboxTokenSource: o.SandboxTokenSource,
		WakeOnRequest:      o.WakeOnRequest, WakeTimeout: o.WakeTimeout,
		TokenReview: authz.TokenReviewOptions{Audiences: splitCSV(o.TokenReviewAudiences),
			SkipAccessCheck: !o.TokenReviewCheckAccess, TTL: o.TokenReviewTTL, CacheSize: o.TokenReviewCacheSize},
		ScopedTokenKeys: o.ScopedTokenSecretFile, ProxyTimeout: o.ProxyTimeout, DialTimeout: o.DialTimeout,
		ResponseTimeout: o.ResponseHeaderTimeout, MaxRequestBody: o.MaxRequestBodyBytes, UpstreamIdleConnsPerHost: o.UpstreamIdleConnsPerHost,
		Retry:     proxy.RetryPolicy{Max: o.Retries, InitialDelay: retryInitial, MaxDelay: retryMax},
		AccessLog: o.AccessLog,
	}
}

func splitCSV(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// applyConfigFile sets, from a YAML map of flag names to scalars, every flag that was not given
// on the command line. Unknown keys and nested values are errors.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("config file %s is not a YAML map of flag names to values: %w", path, err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for key, v := range values {
		if fs.Lookup(key) == nil || key == "config" {
			return fmt.Errorf("config file %s: %q is not a flag of paddock-router; see --help", path, key)
		}
		if explicit[key] {
			continue
		}
		var s string
		switch v := v.(type) {
		case nil:
		case string:
			s = v
		case bool:
			s = strconv.FormatBool(v)
		case float64:
			s = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return fmt.Errorf("config file %s: %q must be a scalar, got %T", path, key, v)
		}
		if err := fs.Set(key, s); err != nil {
			return fmt.Errorf("config file %s: %q: %w", path, key, err)
		}
	}
	return nil
}
