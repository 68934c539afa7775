package e2b

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	"github.com/paddock-dev/paddock/internal/router/resolve"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// dataProxy proxies E2B data-plane requests to the sandbox they name.
type dataProxy struct {
	f  *FrontDoor
	rp *httputil.ReverseProxy
}

type upstreamKey struct{}

func newDataProxy(f *FrontDoor) *dataProxy {
	p := &dataProxy{f: f}
	p.rp = &httputil.ReverseProxy{
		Transport: f.cfg.Transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			ep, _ := pr.In.Context().Value(upstreamKey{}).(resolve.Endpoint)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = ep.HostPort()
			pr.Out.Host = ""
			// Routing headers are the router's business; the daemon sees the request as the SDK
			// sent it otherwise (X-Access-Token and the Basic user selection included). A request
			// that proved the token in E2b-Traffic-Access-Token only (the code-interpreter SDK's
			// context calls) carries it on as X-Access-Token, which sandboxd's ports accept.
			if pr.Out.Header.Get(e2bapi.AccessTokenHeader) == "" {
				pr.Out.Header.Set(e2bapi.AccessTokenHeader, pr.In.Header.Get(e2bapi.TrafficAccessTokenHeader))
			}
			pr.Out.Header.Del(e2bapi.SandboxIDHeader)
			pr.Out.Header.Del(e2bapi.SandboxPortHeader)
			pr.Out.Header.Del(e2bapi.TrafficAccessTokenHeader)
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			f.cfg.Log.Info("E2B data-plane upstream failed", "err", err.Error())
			// 502 is what the SDK reads as "sandbox gone or not reachable".
			writeError(w, http.StatusBadGateway, "could not reach the sandbox's daemon; it may have stopped")
		},
	}
	return p
}

func (p *dataProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.serve(&refusalCounter{ResponseWriter: w, m: p.f.stats}, r)
}

// refusalCounter counts the answers the data plane writes itself: writeError goes through
// WriteHeader before any upstream byte, so a refusal is a WriteHeader with no upstream yet.
type refusalCounter struct {
	http.ResponseWriter
	m        *frontDoorMetrics
	upstream bool
}

func (c *refusalCounter) WriteHeader(code int) {
	if !c.upstream && code >= 400 {
		c.m.data.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *refusalCounter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (p *dataProxy) serve(w *refusalCounter, r *http.Request) {
	t, ok, err := e2bapi.TargetFromHeaders(r.Header.Get(e2bapi.SandboxIDHeader), r.Header.Get(e2bapi.SandboxPortHeader))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !ok {
		if t, ok = e2bapi.TargetFromHost(r.Host, p.f.cfg.Domain); !ok {
			writeError(w, http.StatusBadRequest, "the request names no sandbox: send E2b-Sandbox-Id, or use the host {port}-{id}."+p.f.cfg.Domain)
			return
		}
	}
	token := r.Header.Get(e2bapi.AccessTokenHeader)
	if token == "" {
		token = r.Header.Get(e2bapi.TrafficAccessTokenHeader)
	}
	if token == "" {
		writeError(w, http.StatusUnauthorized, fmt.Sprintf("sandbox %q needs its envdAccessToken in the %s header", t.ID, e2bapi.AccessTokenHeader))
		return
	}
	sb, status, msg := p.f.routeFor(r.Context(), t, token)
	if sb == nil {
		writeError(w, status, msg)
		return
	}
	port := t.Port
	if port == e2bapi.EnvdPort {
		port = p.f.cfg.DaemonPort
	}
	target := headers.Target{Namespace: sb.Namespace, Name: sb.Name, Port: port}
	// Asked before resolving, as the router's proxy does: a request arriving while the resume is
	// under way (Running, not Ready yet) joins it instead of getting 503.
	waking := p.f.cfg.Waker != nil && p.f.cfg.Waker.Waking(target)
	ep, rerr := resolve.FromSandbox(sb, target, p.f.cfg.Policy)
	if rerr != nil && (rerr.Reason == resolve.ReasonSuspended || rerr.Reason == resolve.ReasonNotReady &&
		(waking || p.f.cfg.Waker != nil && wake.Resuming(sb, time.Now(), p.f.cfg.Waker.Timeout()))) {
		// The token proved the caller may reach this sandbox: only now may it wake.
		ep, rerr = p.f.wake(r.Context(), t.ID, target)
	}
	if rerr != nil {
		wake.SetRetryAfter(w.Header(), rerr)
		writeError(w, rerr.Status, rerr.Detail)
		return
	}
	if p.f.cfg.Activity != nil {
		// Idle activity, as for the router's other traffic: a map write, no API call.
		p.f.cfg.Activity.Seen(sb.Namespace, sb.Name)
	}
	w.upstream = true
	proxy.FullDuplex(w.ResponseWriter)
	p.rp.ServeHTTP(w.ResponseWriter, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, ep)))
}

// routeFor finds the Sandbox of the front-door claim named t.ID whose token is token, and
// checks the port is one it serves. Claims of the same name in several namespaces are told apart
// by the token, which is bound to one Sandbox.
func (f *FrontDoor) routeFor(ctx context.Context, t e2bapi.DataTarget, token string) (*agentsv1beta1.Sandbox, int, string) {
	var claims extensionsv1beta1.SandboxClaimList
	if err := f.cache.List(ctx, &claims, client.MatchingFields{e2bapi.ClaimNameIndex: t.ID}); err != nil {
		return nil, http.StatusServiceUnavailable, "sandbox lookup failed; retry shortly"
	}
	known := false
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		sb := f.cachedSandbox(ctx, c.Namespace, c.UID)
		if sb == nil {
			continue
		}
		known = true
		want, err := f.sandboxToken(sb)
		if err != nil {
			f.cfg.Log.Error(err, "deriving a sandbox token")
			return nil, http.StatusServiceUnavailable, "sandbox credentials are unavailable; retry shortly"
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(token)) != 1 {
			continue
		}
		if t.Port != e2bapi.EnvdPort && !resolve.DeclaresPort(sb, t.Port) {
			return nil, http.StatusForbidden, fmt.Sprintf("sandbox %q does not declare port %d; add it to the template's container ports", t.ID, t.Port)
		}
		return sb, 0, ""
	}
	if known {
		return nil, http.StatusUnauthorized, fmt.Sprintf("the access token is not sandbox %q's", t.ID)
	}
	// 502 is what E2B's proxy answers for a sandbox it does not know; the SDK maps it to "gone".
	return nil, http.StatusBadGateway, fmt.Sprintf("sandbox %q not found", t.ID)
}

// wake holds a data-plane request for the paused sandbox id (whose token the caller proved)
// while the router's Waker resumes it. Only a sandbox the idle controller paused with autoResume
// wakes; one paused through the API, or without autoResume, stays paused.
func (f *FrontDoor) wake(ctx context.Context, id string, t headers.Target) (resolve.Endpoint, *resolve.Error) {
	paused := &resolve.Error{Status: http.StatusServiceUnavailable, Reason: resolve.ReasonSuspended}
	if f.cfg.Waker == nil {
		paused.Detail = fmt.Sprintf("sandbox %q is paused and this router does not wake sandboxes (--wake-on-request=false); resume it with Sandbox.connect", id)
		return resolve.Endpoint{}, paused
	}
	return f.cfg.Waker.Hold(ctx, t, paused, wake.Words{
		NotWakeable: fmt.Sprintf("sandbox %q is paused and traffic does not resume it (paused through the API, or created without autoResume); resume it with Sandbox.connect", id),
		ClientGone:  "the client went away while the sandbox was resuming",
		TimedOut:    fmt.Sprintf("sandbox %q is resuming but did not serve within the router's wake timeout (%s); retry in a few seconds", id, f.cfg.Waker.Timeout()),
	})
}
