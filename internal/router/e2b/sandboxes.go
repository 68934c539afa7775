package e2b

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// The sandboxes resource: get, list and kill (create, the longest, is create.go).

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
		httpjson.Write(w, http.StatusOK, d)
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
	var all []e2bapi.SandboxDetail
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
		if d.State == e2bapi.StateRunning {
			running++
		}
		all = append(all, d)
	}
	items, next := page(all, func(d e2bapi.SandboxDetail) string { return d.SandboxID }, filter.pageBounds)
	out := make([]e2bapi.ListedSandbox, 0, len(items))
	for _, d := range items {
		out = append(out, d.Listed())
	}
	if next != "" {
		w.Header().Set(e2bapi.NextTokenHeader, next)
	}
	w.Header().Set(e2bapi.TotalRunningHeader, fmt.Sprint(running))
	httpjson.Write(w, http.StatusOK, out)
}
