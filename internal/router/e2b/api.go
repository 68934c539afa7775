package e2b

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// routes is the control plane's table of contents: one file per resource, each holding its
// handlers (sandboxes.go, create.go, lifecycle.go, metrics.go, templates.go).
func (f *FrontDoor) routes() *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(pattern string, h handlerFunc) { mux.Handle(pattern, f.authenticated(h, 1)) }
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
	handle("PUT /sandboxes/{id}/network", f.updateNetwork)
	handle("GET /templates", f.listTemplates)
	handle("GET /templates/aliases/{alias}", f.templateAlias)
	if f.noSnapshots == "" {
		handle("POST /sandboxes/{id}/snapshots", f.createSnapshot)
		// Fork waits twice: for its snapshot, then for its sandboxes.
		mux.Handle("POST /sandboxes/{id}/fork", f.authenticated(f.fork, 2))
		handle("GET /snapshots", f.listSnapshots)
		handle("DELETE /templates/{id}", f.deleteSnapshot)
	} else {
		unserved := func(w http.ResponseWriter, _ *http.Request, _ string) {
			writeError(w, http.StatusNotImplemented, "snapshots and fork are not served: "+f.noSnapshots)
		}
		for _, p := range []string{"POST /sandboxes/{id}/snapshots", "POST /sandboxes/{id}/fork", "GET /snapshots", "DELETE /templates/{id}"} {
			handle(p, unserved)
		}
	}
	handle("/", func(w http.ResponseWriter, r *http.Request, _ string) {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("%s %s is not served by Paddock's E2B front door yet "+
			"(volumes and template builds are not implemented); see docs/design/e2b-front-door.md", r.Method, r.URL.Path))
	})
	return mux
}

// handlerFunc is a control-plane handler, called with the namespace the API key is bound to.
type handlerFunc func(w http.ResponseWriter, r *http.Request, ns string)

// controlSlack is how much longer than CreateTimeout a control-plane request may run.
const controlSlack = 30 * time.Second

// authenticated answers 401 with E2B's error body unless the request carries a known API key.
// The handler's API calls outlive the client's half of the connection: a client that half-closes
// after sending (nc, some proxies) cancels the request's context at once, which would turn every
// answer into a 500. They are bounded by waits times CreateTimeout, plus controlSlack, instead.
func (f *FrontDoor) authenticated(h handlerFunc, waits time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), waits*f.cfg.CreateTimeout+controlSlack)
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

// namespaceOf authenticates the API key and returns the namespace it is bound to.
func (f *FrontDoor) namespaceOf(ctx context.Context, r *http.Request) (string, error) {
	key := r.Header.Get(e2bapi.APIKeyHeader)
	if key == "" {
		return "", errMissingKey
	}
	var secrets corev1.SecretList
	if err := f.cache.List(ctx, &secrets, client.InNamespace(f.cfg.KeysNamespace)); err != nil {
		return "", fmt.Errorf("reading API keys: %w", err)
	}
	ns := ""
	for i := range secrets.Items {
		s := &secrets.Items[i]
		// Compare every key in constant time so the answer's timing says nothing about which
		// Secret came close.
		if subtle.ConstantTimeCompare(s.Data[e2bapi.APIKeyDataKey], []byte(key)) == 1 && ns == "" {
			ns = s.Labels[e2bapi.APIKeyNamespaceLabel]
		}
	}
	if ns == "" {
		return "", errUnknownKey
	}
	return ns, nil
}

var (
	errMissingKey = errors.New("missing API key: send it in the X-API-Key header (E2B_API_KEY); create one with `paddock e2b create-key`")
	errUnknownKey = errors.New("invalid API key: no API key Secret holds it; create one with `paddock e2b create-key`")
)

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

// maxBodyBytes bounds a control-plane request body.
const maxBodyBytes = 1 << 20

// readBody decodes the request body into v, or answers 400 naming what is wrong and returns false.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decode(r, v); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
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

func (f *FrontDoor) internal(w http.ResponseWriter, err error) {
	f.cfg.Log.Error(err, "E2B control-plane request failed")
	writeError(w, http.StatusInternalServerError, err.Error())
}

// writeError answers E2B's error body, {"code","message"}, with the same status.
func writeError(w http.ResponseWriter, status int, message string) {
	httpjson.Write(w, status, e2bapi.Error{Code: status, Message: message})
}
