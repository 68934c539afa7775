// Package proxy is the router's data path: validate the routing headers, authorize, resolve the
// sandbox, and reverse-proxy the request (streaming and upgrades included) with bounded retries.
package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/metrics"
	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// Config holds what the handler needs. Every field is required unless marked optional.
type Config struct {
	Resolver   *resolve.Resolver
	Authorizer authz.Authorizer
	Metrics    *metrics.Metrics
	Log        logr.Logger
	// AccessLog writes one line per request.
	AccessLog bool
	// ProxyTimeout bounds a non-upgrade request from start to the end of the response; a
	// shorter X-Sandbox-Timeout from the client wins.
	ProxyTimeout time.Duration
	// MaxRequestBodyBytes refuses larger bodies with 413; 0 means no limit.
	MaxRequestBodyBytes int64
	Retry               RetryPolicy
	// Transport is optional; NewTransport with the resolver's policy is the default.
	Transport http.RoundTripper
	// Tracer, when set, records one server span per request and sends its W3C trace context
	// upstream; optional.
	Tracer trace.Tracer
	// Credentials, when set, gives the sandbox token the router sends upstream as
	// "Authorization: Bearer"; optional (without it the client's Authorization is dropped).
	Credentials Credentials
	// Waker, when set, wakes a Sandbox suspended for being idle and holds the request until it
	// serves (--wake-on-request); optional.
	Waker *wake.Waker
	// Activity, when set, learns of every forwarded request for the idle controller; optional.
	Activity *wake.Reporter
}

// Credentials derives the token a sandbox's daemon accepts. Its error is client-facing: it says
// what is missing and where (for example the key Secret that does not exist yet).
type Credentials interface {
	SandboxToken(namespace, name string, uid types.UID) (string, error)
}

// Handler serves proxied requests.
type Handler struct {
	cfg Config
	rp  *httputil.ReverseProxy
}

// New returns the proxy handler.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg}
	base := cfg.Transport
	if base == nil {
		base = NewTransport(cfg.Resolver.Policy, 30*time.Second, 30*time.Second, 0)
	}
	rt := base
	if cfg.Retry.Max > 0 {
		rt = &retryTransport{base: base, policy: cfg.Retry, onRetry: func(r *http.Request) {
			cfg.Metrics.UpstreamRetries.WithLabelValues(stateOf(r.Context()).namespaceLabel).Inc()
		}}
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:   h.rewrite,
		Transport: rt,
		// Zero still flushes every write of a stream at once (chunked or text/event-stream
		// responses); only fixed-length bodies skip per-write flushes and the flush goroutine.
		FlushInterval: 0,
		ErrorHandler:  h.upstreamError,
		ErrorLog:      log.New(logWriter{cfg.Log}, "", 0),
		BufferPool:    &bufferPool{},
	}
	return h
}

// requestState is what one request learns on its way through, for metrics and the access log.
type requestState struct {
	target         headers.Target
	endpoint       resolve.Endpoint
	namespaceLabel string
	failure        string
	// token is the sandbox token sent upstream; empty sends no Authorization.
	token string
}

type stateKey struct{}

func stateOf(ctx context.Context) *requestState {
	if st, ok := ctx.Value(stateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{namespaceLabel: metrics.NoNamespace}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	st := &requestState{namespaceLabel: metrics.NoNamespace}
	h.cfg.Metrics.Inflight.Inc()
	ctx, span := h.startSpan(r)
	// Deferred so the request is counted and logged even when a broken stream aborts the handler.
	defer func() {
		h.cfg.Metrics.Inflight.Dec()
		h.finish(rec, r, st, time.Since(start), span.SpanContext())
		endSpan(span, rec.statusCode(), st)
	}()
	h.serve(rec, r.WithContext(context.WithValue(ctx, stateKey{}, st)), st)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, st *requestState) {
	t, herr := headers.Parse(r.Header, h.cfg.Resolver.Policy)
	if herr != nil {
		st.failure = "bad_headers"
		WriteDetail(w, http.StatusBadRequest, herr.Detail)
		return
	}
	st.target = t
	if err := h.cfg.Authorizer.Authorize(r.Context(), r, t); err != nil {
		h.deny(w, t, err, st)
		return
	}
	h.cfg.Metrics.AuthzDecisions.WithLabelValues(metrics.NoNamespace, "allow").Inc()
	// Asked before resolving: a resume that ends in between leaves the Sandbox Ready, and joining
	// it then returns at once.
	waking := h.cfg.Waker != nil && h.cfg.Waker.Waking(t)
	ep, rerr := h.cfg.Resolver.Resolve(r.Context(), t)
	if rerr != nil && h.cfg.Waker != nil && (rerr.Reason == resolve.ReasonSuspended ||
		rerr.Reason == resolve.ReasonNotReady && (waking || h.cfg.Waker.ResumedElsewhere(r.Context(), t))) {
		// Authorized already: a request that may not reach the sandbox never wakes it. One that
		// arrives while a resume is under way (Running, not Ready yet), this router's or another
		// replica's, waits for it.
		ep, rerr = h.wake(r.Context(), t, rerr)
	}
	if rerr != nil {
		st.failure = rerr.Reason
		h.cfg.Metrics.ResolveFailures.WithLabelValues(rerr.Reason).Inc()
		if rerr.Cause != nil {
			h.cfg.Log.Error(rerr.Cause, "sandbox lookup failed", "sandbox", klogRef(t))
		}
		if rerr.Status == http.StatusForbidden || rerr.Reason == resolve.ReasonWarmPool {
			h.denied(t, rerr.Reason, rerr.Detail)
		}
		wake.SetRetryAfter(w.Header(), rerr)
		WriteDetail(w, rerr.Status, rerr.Detail)
		return
	}
	st.endpoint = ep
	if h.cfg.Activity != nil && ep.Source != resolve.SourceDNS {
		h.cfg.Activity.Seen(t.Namespace, t.Name)
	}
	if h.cfg.Credentials != nil {
		token, err := h.cfg.Credentials.SandboxToken(t.Namespace, t.Name, ep.UID)
		if err != nil {
			st.failure = metrics.DenyCredentialsUnavailable
			h.denied(t, st.failure, err.Error())
			WriteDetail(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		st.token = token
	}
	if ep.Source == resolve.SourceSandbox || ep.Source == resolve.SourceServiceFQDN {
		// Only namespaces proven by a Sandbox object become label values, so clients cannot
		// mint unbounded series by sending made-up namespaces.
		st.namespaceLabel = t.Namespace
	}
	if max := h.cfg.MaxRequestBodyBytes; max > 0 {
		if r.ContentLength > max {
			st.failure = "body_too_large"
			WriteDetail(w, http.StatusRequestEntityTooLarge, bodyTooLarge(max))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
	}
	if !isUpgrade(r) {
		// Upgraded connections live until either side closes them.
		timeout := h.cfg.ProxyTimeout
		if t.Timeout > 0 && t.Timeout < timeout {
			timeout = t.Timeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	FullDuplex(w)
	h.rp.ServeHTTP(w, r)
}

// FullDuplex lets the upstream request keep reading the client's body after the response has
// started. Without it Go's HTTP/1 server, on the first response write, consumes and closes the
// request body; the transport, still reading it for its end-of-body check, then fails its write
// and closes the upstream connection, cutting the response stream (a Connect stream ends
// "terminated" or "incomplete envelope" in the SDK). Streams where the client keeps sending after
// the answer began need it too. A writer that cannot (HTTP/2) is full duplex already. Every
// reverse proxy of the router calls it before forwarding.
func FullDuplex(w http.ResponseWriter) {
	_ = http.NewResponseController(w).EnableFullDuplex()
}

// wake holds a request for a suspended Sandbox while the Waker resumes it. Nothing has been read
// from the request yet, so its body is forwarded once, after the wait, or never.
func (h *Handler) wake(ctx context.Context, t headers.Target, suspended *resolve.Error) (resolve.Endpoint, *resolve.Error) {
	return h.cfg.Waker.Hold(ctx, t, suspended, wake.Words{
		NotWakeable: fmt.Sprintf("Sandbox %q in namespace %q is suspended and traffic does not wake it (suspended by hand, or paddock.dev/wake-on-request is false); set spec.operatingMode to Running to resume it.", t.Name, t.Namespace),
		ClientGone:  "The client went away while the sandbox was waking up.",
		TimedOut:    fmt.Sprintf("Sandbox %q in namespace %q is waking up but did not serve within the router's wake timeout (%s); retry in a few seconds.", t.Name, t.Namespace, h.cfg.Waker.Timeout()),
	})
}

func (h *Handler) deny(w http.ResponseWriter, t headers.Target, err error, st *requestState) {
	status := authz.StatusFor(err)
	st.failure = "authz"
	h.cfg.Metrics.AuthzDecisions.WithLabelValues(metrics.NoNamespace, "deny").Inc()
	if status == http.StatusInternalServerError {
		h.cfg.Log.Error(err, "authorization failed", "sandbox", klogRef(t))
		WriteDetail(w, status, "Authorization could not be decided; retry shortly.")
		return
	}
	reason := metrics.DenyForbidden
	if status == http.StatusUnauthorized {
		reason = metrics.DenyUnauthenticated
	}
	h.denied(t, reason, err.Error())
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="paddock-router"`)
	}
	WriteDetail(w, status, err.Error())
}

// denied counts and logs a request refused before any upstream connection, with its reason.
func (h *Handler) denied(t headers.Target, reason, detail string) {
	h.cfg.Metrics.Denials.WithLabelValues(reason).Inc()
	h.cfg.Log.Info("request denied", "sandbox", klogRef(t), "port", t.Port, "reason", reason, "detail", detail)
}

func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In.Context())
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = st.endpoint.HostPort()
	pr.Out.Host = ""
	// The router consumes the client's credential; the sandbox sees only its own token.
	pr.Out.Header.Del("Authorization")
	if st.token != "" {
		pr.Out.Header.Set("Authorization", "Bearer "+st.token)
	}
	pr.SetXForwarded()
	h.injectTrace(pr.Out.Context(), pr.Out.Header)
	if isUpgrade(pr.In) {
		// Browsers' Origin would make upstream WebSocket servers reject a cross-origin hop.
		pr.Out.Header.Del("Origin")
	}
}

func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r.Context())
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		st.failure = "body_too_large"
		WriteDetail(w, http.StatusRequestEntityTooLarge, bodyTooLarge(mbe.Limit))
		return
	}
	reason := Classify(err)
	st.failure = "upstream_" + reason
	h.cfg.Metrics.UpstreamErrors.WithLabelValues(st.namespaceLabel, reason).Inc()
	if reason != "canceled" {
		h.cfg.Log.Error(err, "upstream connect failure", "sandbox", klogRef(st.target),
			"source", st.endpoint.Source, "upstream", st.endpoint.HostPort())
	}
	WriteDetail(w, http.StatusBadGateway, "Could not connect to the backend sandbox: "+st.target.Name)
}

func (h *Handler) finish(rec *recorder, r *http.Request, st *requestState, d time.Duration, sc trace.SpanContext) {
	code := rec.statusCode()
	method := metrics.Method(r.Method)
	h.cfg.Metrics.Requests.WithLabelValues(method, fmt.Sprint(code), st.namespaceLabel).Inc()
	h.cfg.Metrics.Duration.WithLabelValues(method, fmt.Sprint(code), st.namespaceLabel).Observe(d.Seconds())
	if !h.cfg.AccessLog {
		return
	}
	clientIP, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		clientIP = r.RemoteAddr
	}
	kv := []any{"method", r.Method, "path", r.URL.Path, "status", code,
		"duration_ms", float64(d.Microseconds()) / 1000, "client_ip", clientIP,
		"sandbox_id", r.Header.Get(headers.SandboxID), "sandbox_namespace", r.Header.Get(headers.SandboxNamespace),
		"bytes_out", rec.bytes, "user_agent", r.UserAgent(), "source", string(st.endpoint.Source), "failure", st.failure}
	if sc.IsValid() {
		kv = append(kv, "trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	h.cfg.Log.Info("request", kv...)
}

func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("Request body exceeds the router limit of %d bytes.", limit)
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

func klogRef(t headers.Target) klog.ObjectRef { return klog.KRef(t.Namespace, t.Name) }

// recorder remembers the status and size of a response for metrics and the access log. It keeps
// Flush and Hijack reachable, which streaming and upgrades need.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// bufferPool reuses the 32 KiB copy buffers the reverse proxy would otherwise allocate per request.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// logWriter sends the reverse proxy's own log lines to the structured logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("reverse proxy", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}
