package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
)

// maxBodyBytes bounds a control-plane request body.
const maxBodyBytes = 1 << 20

// handlerFunc is a control-plane handler, called with the namespace the API key is bound to.
type handlerFunc func(w http.ResponseWriter, r *http.Request, ns string)

func (f *FrontDoor) routes() *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(pattern string, h handlerFunc) { mux.Handle(pattern, f.authenticated(h)) }
	handle("POST /sandboxes", f.create)
	handle("POST /v2/sandboxes", f.create)
	handle("GET /sandboxes", func(w http.ResponseWriter, r *http.Request, ns string) { f.list(w, r, ns, true) })
	handle("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request, ns string) { f.list(w, r, ns, false) })
	handle("GET /sandboxes/{id}", f.get)
	handle("DELETE /sandboxes/{id}", f.kill)
	handle("POST /sandboxes/{id}/timeout", f.setTimeout)
	handle("POST /sandboxes/{id}/pause", f.pause)
	handle("POST /sandboxes/{id}/connect", f.connect)
	handle("POST /v2/sandboxes/{id}/connect", f.connect)
	handle("POST /sandboxes/{id}/resume", f.connect)
	handle("GET /sandboxes/{id}/metrics", f.metrics)
	handle("/", func(w http.ResponseWriter, r *http.Request, _ string) {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("%s %s is not served by Paddock's E2B front door yet "+
			"(snapshots, fork, volumes, network updates, templates and builds are not implemented); see docs/design/e2b-front-door.md", r.Method, r.URL.Path))
	})
	return mux
}

// controlSlack is how much longer than CreateTimeout a control-plane request may run.
const controlSlack = 30 * time.Second

// authenticated answers 401 with E2B's error body unless the request carries a known API key.
// The handler's API calls outlive the client's half of the connection: a client that half-closes
// after sending (nc, some proxies) cancels the request's context at once, which would turn every
// answer into a 500. They are bounded by CreateTimeout plus controlSlack instead.
func (f *FrontDoor) authenticated(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), f.cfg.CreateTimeout+controlSlack)
		defer cancel()
		r = r.WithContext(ctx)
		ns, err := f.namespaceOf(r.Context(), r)
		switch {
		case errors.Is(err, errMissingKey), errors.Is(err, errUnknownKey):
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		case err != nil:
			f.internal(w, err)
			return
		}
		h(w, r, ns)
	})
}

func (f *FrontDoor) internal(w http.ResponseWriter, err error) {
	f.cfg.Log.Error(err, "E2B control-plane request failed")
	writeError(w, http.StatusInternalServerError, err.Error())
}

func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxBodyBytes {
		return fmt.Errorf("the request body exceeds %d bytes", maxBodyBytes)
	}
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the request body is not the JSON this endpoint takes: %w", err)
	}
	return nil
}

func (f *FrontDoor) create(w http.ResponseWriter, r *http.Request, ns string) {
	var req CreateRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.TemplateID == "" {
		req.TemplateID = DefaultTemplate
	}
	lifetime, err := timeoutOf(req.Timeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	life, err := lifecycleOf(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pool, err := f.poolFor(r.Context(), ns, req.TemplateID)
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	// Without the credentials key no sandbox token can be handed out: refuse before writing.
	if err := f.cfg.Tokens.KeyErr(); err != nil {
		f.cfg.Log.Error(err, "E2B create refused")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	claim, err := f.createClaim(r.Context(), ns, pool, &req, lifetime, life)
	if err != nil {
		f.internal(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.CreateTimeout)
	defer cancel()
	sb, err := f.awaitDaemon(ctx, claim)
	if err == nil {
		var token string
		if token, err = f.sandboxToken(sb); err == nil {
			writeJSON(w, http.StatusCreated, f.sandboxResponse(claim, token))
			return
		}
	}
	// Nobody will ever learn this claim's ID: do not leave it behind.
	if derr := f.client.Delete(context.Background(), claim, client.PropagationPolicy(metav1.DeletePropagationBackground)); derr != nil && !apierrors.IsNotFound(derr) {
		f.cfg.Log.Error(derr, "deleting the claim of a failed create", "claim", klog.KObj(claim))
	}
	f.cfg.Log.Info("E2B create failed", "claim", klog.KObj(claim), "err", err.Error())
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox for template %q was not ready in %s: %v", req.TemplateID, f.cfg.CreateTimeout, err))
}

// createClaim creates the claim under a fresh ID; a clash of 100-bit IDs is retried once.
func (f *FrontDoor) createClaim(ctx context.Context, ns, pool string, req *CreateRequest, lifetime time.Duration, life lifecycleOptions) (*extensionsv1beta1.SandboxClaim, error) {
	for attempt := 0; ; attempt++ {
		id, err := NewID()
		if err != nil {
			return nil, err
		}
		claim, err := newClaim(ns, id, pool, req.TemplateID, req, lifetime, life, f.cfg.Now())
		if err != nil {
			return nil, err
		}
		err = f.client.Create(ctx, claim)
		if apierrors.IsAlreadyExists(err) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating SandboxClaim %s/%s: %w", ns, id, err)
		}
		return claim, nil
	}
}

// poolFor finds the SandboxWarmPool serving templateID in ns: the pool of that name, else one
// labelled TemplateLabel=templateID.
func (f *FrontDoor) poolFor(ctx context.Context, ns, templateID string) (string, error) {
	var pool extensionsv1beta1.SandboxWarmPool
	err := f.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: templateID}, &pool)
	if err == nil {
		return pool.Name, nil
	}
	if !apierrors.IsNotFound(err) && !isInvalidName(err) {
		return "", err
	}
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := f.cache.List(ctx, &pools, client.InNamespace(ns), client.MatchingLabels{TemplateLabel: templateID}); err == nil && len(pools.Items) > 0 {
		return pools.Items[0].Name, nil
	}
	return "", fmt.Errorf("template %q not found: namespace %q has no SandboxWarmPool named %q or labelled %s=%s",
		templateID, ns, templateID, TemplateLabel, templateID)
}

func isInvalidName(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) }

func (f *FrontDoor) sandboxResponse(c *extensionsv1beta1.SandboxClaim, token string) Sandbox {
	s := Sandbox{SandboxID: c.Name, TemplateID: templateOf(c), ClientID: clientID, EnvdVersion: EnvdVersion, EnvdAccessToken: token}
	if f.cfg.Domain != "" {
		s.Domain = ptr.To(f.cfg.Domain)
	}
	return s
}

// claimFor reads the front-door claim id in ns from the API server (not the cache, so a caller
// sees its own last write); nil when there is none, or it is being deleted.
func (f *FrontDoor) claimFor(ctx context.Context, ns, id string) (*extensionsv1beta1.SandboxClaim, error) {
	if !IsID(id) {
		return nil, nil
	}
	var c extensionsv1beta1.SandboxClaim
	err := f.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: id}, &c)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading SandboxClaim %s/%s: %w", ns, id, err)
	case c.Labels[SandboxLabel] != "true" || c.DeletionTimestamp != nil:
		return nil, nil
	}
	return &c, nil
}

// withClaim runs h with the claim the path names, or answers 404 with E2B's body.
func (f *FrontDoor) withClaim(w http.ResponseWriter, r *http.Request, ns string, h func(*extensionsv1beta1.SandboxClaim)) {
	id := r.PathValue("id")
	c, err := f.claimFor(r.Context(), ns, id)
	if err != nil {
		f.internal(w, err)
		return
	}
	if c == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id))
		return
	}
	h(c)
}

// boundSandbox is the Sandbox bound to c, read from the API server; nil while c is unbound.
func (f *FrontDoor) boundSandbox(ctx context.Context, c *extensionsv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	name := c.Status.Sandbox.Name
	if cached := f.cachedSandbox(ctx, c.Namespace, c.UID); cached != nil {
		name = cached.Name
	}
	if name == "" {
		return nil, nil
	}
	var sb agentsv1beta1.Sandbox
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Sandbox %s/%s: %w", c.Namespace, name, err)
	}
	return &sb, nil
}

// cachedSandbox is the Sandbox labelled with the claim's UID in the cache, or nil.
func (f *FrontDoor) cachedSandbox(ctx context.Context, ns string, uid types.UID) *agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	if err := f.cache.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{agentsv1beta1.SandboxClaimUIDIndex: string(uid)}); err != nil {
		return nil
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return &list.Items[i]
		}
	}
	return nil
}

func (f *FrontDoor) get(w http.ResponseWriter, r *http.Request, ns string) {
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		sb, err := f.boundSandbox(r.Context(), c)
		if err != nil {
			f.internal(w, err)
			return
		}
		d := detailOf(c, sb)
		if sb != nil {
			if d.EnvdAccessToken, err = f.sandboxToken(sb); err != nil {
				f.internal(w, err)
				return
			}
		}
		if f.cfg.Domain != "" {
			d.Domain = ptr.To(f.cfg.Domain)
		}
		writeJSON(w, http.StatusOK, d)
	})
}

func (f *FrontDoor) kill(w http.ResponseWriter, r *http.Request, ns string) {
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		err := f.client.Delete(r.Context(), c, client.Preconditions{UID: &c.UID},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", c.Name))
		case err != nil:
			f.internal(w, fmt.Errorf("deleting SandboxClaim %s/%s: %w", c.Namespace, c.Name, err))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

func (f *FrontDoor) setTimeout(w http.ResponseWriter, r *http.Request, ns string) {
	var req timeoutRequest
	if err := decode(r, &req); err != nil || req.Timeout == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body must be {\"timeout\": <seconds>}: %v", err))
		return
	}
	lifetime, err := timeoutOf(req.Timeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		if err := f.setLifetime(r.Context(), c, lifetime); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// setLifetime gives the sandbox lifetime from now: a new expiry, or, with autoPause, a new idle
// timeout (the idle controller counts it from the last activity).
func (f *FrontDoor) setLifetime(ctx context.Context, c *extensionsv1beta1.SandboxClaim, lifetime time.Duration) error {
	if !pausesOnTimeout(c) {
		return f.setExpiry(ctx, c, expiry(f.cfg.Now(), lifetime))
	}
	p := claimPolicy(c)
	p.Timeout = lifetime
	return activity.SetPolicy(ctx, f.client, c, p)
}

// setExpiry replaces the claim's lifecycle (nil: no expiry) with one merge patch. No optimistic
// lock: the controller's status writes change the resourceVersion, and the front door is the only
// writer of an E2B claim's lifecycle, so the last write winning is the intent.
func (f *FrontDoor) setExpiry(ctx context.Context, c *extensionsv1beta1.SandboxClaim, l *extensionsv1beta1.Lifecycle) error {
	orig := c.DeepCopy()
	c.Spec.Lifecycle = l
	if err := f.client.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("updating the expiry of SandboxClaim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// setMode asks the Sandbox to be Running or Suspended, with a merge patch of that one field.
func (f *FrontDoor) setMode(ctx context.Context, sb *agentsv1beta1.Sandbox, mode agentsv1beta1.SandboxOperatingMode) error {
	orig := sb.DeepCopy()
	sb.Spec.OperatingMode = mode
	if err := f.client.Patch(ctx, sb, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting operatingMode %s on Sandbox %s/%s: %w", mode, sb.Namespace, sb.Name, err)
	}
	return nil
}

// pause suspends the claim's Sandbox: its Pod goes, its volumes stay, memory is lost. A paused
// sandbox does not expire, as in E2B; connect gives it a new timeout.
func (f *FrontDoor) pause(w http.ResponseWriter, r *http.Request, ns string) {
	var req connectRequest // {"memory": bool}: accepted, no memory snapshots yet
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		sb, err := f.boundSandbox(r.Context(), c)
		switch {
		case err != nil:
			f.internal(w, err)
			return
		case sb == nil:
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is still starting; pause it once create has answered", c.Name))
			return
		case stateOf(sb) == StatePaused:
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", c.Name))
			return
		}
		if err := f.setMode(r.Context(), sb, agentsv1beta1.SandboxOperatingModeSuspended); err != nil {
			f.internal(w, err)
			return
		}
		if err := f.setExpiry(r.Context(), c, nil); err != nil {
			f.internal(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// connect resumes a paused sandbox (201) or finds it running (200), and answers once its daemon
// accepts requests.
func (f *FrontDoor) connect(w http.ResponseWriter, r *http.Request, ns string) {
	var req connectRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		sb, err := f.boundSandbox(r.Context(), c)
		if err != nil {
			f.internal(w, err)
			return
		}
		resumed := sb != nil && stateOf(sb) == StatePaused
		ctx, cancel := context.WithTimeout(r.Context(), f.cfg.CreateTimeout)
		defer cancel()
		if resumed {
			if err := f.resume(ctx, sb); err != nil {
				writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox %q could not be resumed: %v", c.Name, err))
				return
			}
		}
		if resumed || req.Timeout != nil {
			lifetime, err := timeoutOf(req.Timeout)
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			// connect never shortens a running sandbox's life, as E2B's does not.
			next := expiry(f.cfg.Now(), lifetime)
			l := c.Spec.Lifecycle
			switch {
			case pausesOnTimeout(c):
				if req.Timeout != nil && (resumed || claimPolicy(c).Timeout < lifetime) {
					err = f.setLifetime(r.Context(), c, lifetime)
				}
			case resumed || l == nil || l.ShutdownTime == nil || l.ShutdownTime.Before(next.ShutdownTime):
				err = f.setExpiry(r.Context(), c, next)
			}
			if err != nil {
				f.internal(w, err)
				return
			}
		}
		ready, err := f.awaitDaemon(ctx, c)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("sandbox %q did not become ready in %s: %v", c.Name, f.cfg.CreateTimeout, err))
			return
		}
		token, err := f.sandboxToken(ready)
		if err != nil {
			f.internal(w, err)
			return
		}
		writeJSON(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[resumed], f.sandboxResponse(c, token))
	})
}

// metrics answers an empty series: Paddock does not sample sandbox metrics yet (documented).
func (f *FrontDoor) metrics(w http.ResponseWriter, r *http.Request, ns string) {
	f.withClaim(w, r, ns, func(*extensionsv1beta1.SandboxClaim) { writeJSON(w, http.StatusOK, []SandboxDetail{}) })
}

// listedSandbox is SandboxDetail without the token and domain.
type listedSandbox struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	StartedAt   string            `json:"startedAt"`
	EndAt       string            `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	CPUCount    int64             `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
}

func (f *FrontDoor) list(w http.ResponseWriter, r *http.Request, ns string, v1 bool) {
	filter, err := parseListQuery(r.URL.Query(), v1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var claims extensionsv1beta1.SandboxClaimList
	if err := f.cache.List(r.Context(), &claims, client.InNamespace(ns)); err != nil {
		f.internal(w, fmt.Errorf("listing SandboxClaims: %w", err))
		return
	}
	var all []SandboxDetail
	running := 0
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		d := detailOf(c, f.cachedSandbox(r.Context(), ns, c.UID))
		if !filter.matches(d.Metadata, d.State) {
			continue
		}
		if d.State == StateRunning {
			running++
		}
		all = append(all, d)
	}
	items, next := page(all, filter)
	out := make([]listedSandbox, 0, len(items))
	for _, d := range items {
		out = append(out, listedSandbox{SandboxID: d.SandboxID, TemplateID: d.TemplateID, ClientID: d.ClientID,
			StartedAt: d.StartedAt, EndAt: d.EndAt, EnvdVersion: d.EnvdVersion, CPUCount: d.CPUCount,
			MemoryMB: d.MemoryMB, DiskSizeMB: d.DiskSizeMB, Metadata: d.Metadata, State: d.State})
	}
	if next != "" {
		w.Header().Set(NextTokenHeader, next)
	}
	w.Header().Set(TotalRunningHeader, fmt.Sprint(running))
	writeJSON(w, http.StatusOK, out)
}
