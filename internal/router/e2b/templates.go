package e2b

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// The templates resource: the SandboxWarmPools a key's namespace offers, as E2B's template list,
// and the alias lookup behind the SDK's Template.exists. Template builds answer 501.

// listTemplates serves GET /templates: one entry per SandboxWarmPool in ns, by name. A pool's
// spawn count and last spawn are the front-door sandboxes it serves now: Paddock keeps no history
// of deleted claims.
func (f *FrontDoor) listTemplates(w http.ResponseWriter, r *http.Request, ns string) {
	ctx := r.Context()
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := f.cache.List(ctx, &pools, client.InNamespace(ns)); err != nil {
		f.internal(w, fmt.Errorf("listing SandboxWarmPools in %s: %w", ns, err))
		return
	}
	var claims extensionsv1beta1.SandboxClaimList
	if err := f.cache.List(ctx, &claims, client.InNamespace(ns), client.MatchingLabels{e2bapi.SandboxLabel: "true"}); err != nil {
		f.internal(w, fmt.Errorf("listing front-door SandboxClaims in %s: %w", ns, err))
		return
	}
	slices.SortFunc(pools.Items, func(a, b extensionsv1beta1.SandboxWarmPool) int { return cmp.Compare(a.Name, b.Name) })
	out := make([]e2bapi.Template, 0, len(pools.Items))
	for i := range pools.Items {
		tpl, err := f.templateOfPool(ctx, &pools.Items[i])
		if err != nil {
			f.internal(w, err)
			return
		}
		out = append(out, templateEntry(&pools.Items[i], tpl, claims.Items))
	}
	httpjson.Write(w, http.StatusOK, out)
}

// templateAlias serves GET /templates/aliases/{alias}: 200 when a pool serves the alias as a
// create would find it, else 404.
func (f *FrontDoor) templateAlias(w http.ResponseWriter, r *http.Request, ns string) {
	pool, err := f.poolFor(r.Context(), ns, r.PathValue("alias"))
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	httpjson.Write(w, http.StatusOK, e2bapi.TemplateAlias{TemplateID: pool})
}

// templateOfPool is the pool's SandboxTemplate from the cache; nil when it does not exist.
func (f *FrontDoor) templateOfPool(ctx context.Context, pool *extensionsv1beta1.SandboxWarmPool) (*extensionsv1beta1.SandboxTemplate, error) {
	var tpl extensionsv1beta1.SandboxTemplate
	err := f.cache.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.TemplateRef.Name}, &tpl)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading SandboxTemplate %s/%s of pool %s: %w", pool.Namespace, pool.Spec.TemplateRef.Name, pool.Name, err)
	}
	return &tpl, nil
}

// templateEntry renders one pool. Without its SandboxTemplate the pool cannot serve a create:
// its build status is error. Sizes are the template's first container's, as detailOf reports a
// sandbox's; the build ID is the template's UID, which a recreated template changes.
func templateEntry(pool *extensionsv1beta1.SandboxWarmPool, tpl *extensionsv1beta1.SandboxTemplate, claims []extensionsv1beta1.SandboxClaim) e2bapi.Template {
	created := pool.CreationTimestamp.UTC().Format(time.RFC3339)
	t := e2bapi.Template{
		TemplateID: pool.Name, BuildID: string(pool.UID), CPUCount: 1, MemoryMB: 512,
		Aliases: []string{}, Names: []string{pool.Name}, CreatedAt: created, UpdatedAt: created,
		BuildCount: 1, EnvdVersion: e2bapi.EnvdVersion, BuildStatus: e2bapi.BuildStatusError,
	}
	if alias := pool.Labels[e2bapi.TemplateLabel]; alias != "" && alias != pool.Name {
		t.Aliases = append(t.Aliases, alias)
		t.Names = append(t.Names, alias)
	}
	if tpl != nil {
		t.BuildID, t.BuildStatus = string(tpl.UID), e2bapi.BuildStatusReady
		if tpl.CreationTimestamp.After(pool.CreationTimestamp.Time) {
			t.UpdatedAt = tpl.CreationTimestamp.UTC().Format(time.RFC3339)
		}
		if containers := tpl.Spec.PodTemplate.Spec.Containers; len(containers) > 0 {
			res := containers[0].Resources
			if q, ok := quantity(res, corev1.ResourceCPU); ok {
				t.CPUCount = max(1, int64(q.AsApproximateFloat64()+0.999))
			}
			if q, ok := quantity(res, corev1.ResourceMemory); ok {
				t.MemoryMB = q.Value() >> 20
			}
			if q, ok := quantity(res, corev1.ResourceEphemeralStorage); ok {
				t.DiskSizeMB = q.Value() >> 20
			}
		}
	}
	var last time.Time
	for i := range claims {
		if claims[i].Spec.WarmPoolRef.Name != pool.Name || claims[i].DeletionTimestamp != nil {
			continue
		}
		t.SpawnCount++
		if c := claims[i].CreationTimestamp.Time; c.After(last) {
			last = c
		}
	}
	if !last.IsZero() {
		at := last.UTC().Format(time.RFC3339)
		t.LastSpawnedAt = &at
	}
	return t
}
