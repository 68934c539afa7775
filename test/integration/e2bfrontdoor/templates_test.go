package e2bfrontdoor

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// GET /templates lists the pools of the key's namespace with their alias, sizes and live
// sandboxes, and nothing of another namespace; a pool whose template is gone is listed with
// build status error. Template.exists' alias lookup finds a pool by name or alias, 404 otherwise.
func TestTemplatesListAndAliases(t *testing.T) {
	h := start(t, 1)
	ctx := framework.Context(t, framework.DefaultTimeout)
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: "base-tpl"}, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.PodTemplate.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
		"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("1Gi"), "ephemeral-storage": resource.MustParse("2Gi")}
	if err := env.Client.Update(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("orphan", h.ns, "missing-tpl").Replicas(0).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("elsewhere", h.otherNS, "base-tpl").Replicas(0).Obj())
	sbx := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base"})

	var got []e2bapi.Template
	framework.Eventually(t, func(context.Context) error {
		r := h.call(t, http.MethodGet, "/templates", h.apiKey, nil)
		if r.status != http.StatusOK {
			return fmt.Errorf("GET /templates: %d %s", r.status, r.body)
		}
		got = nil
		r.into(t, &got)
		if len(got) != 2 || got[1].MemoryMB != 1024 {
			return fmt.Errorf("GET /templates = %s; want the pools orphan and python, python's template resized", r.body)
		}
		return nil
	})
	orphan, python := got[0], got[1]
	if orphan.TemplateID != "orphan" || orphan.BuildStatus != e2bapi.BuildStatusError || orphan.SpawnCount != 0 || orphan.LastSpawnedAt != nil {
		t.Errorf("pool without its template = %+v; want templateID orphan, build status error, nothing spawned", orphan)
	}
	want := e2bapi.Template{TemplateID: "python", BuildID: string(tpl.UID), CPUCount: 2, MemoryMB: 1024, DiskSizeMB: 2048,
		Aliases: []string{"base"}, Names: []string{"python", "base"}, SpawnCount: 1, BuildCount: 1,
		EnvdVersion: e2bapi.EnvdVersion, BuildStatus: e2bapi.BuildStatusReady}
	claim := h.claim(t, sbx.SandboxID)
	if python.LastSpawnedAt == nil || *python.LastSpawnedAt != claim.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z07:00") {
		t.Errorf("lastSpawnedAt = %v, want the claim's creation %s", python.LastSpawnedAt, claim.CreationTimestamp.UTC())
	}
	python.LastSpawnedAt, python.CreatedAt, python.UpdatedAt = nil, "", ""
	if fmt.Sprint(python) != fmt.Sprint(want) {
		t.Errorf("pool python =\n%+v\nwant\n%+v", python, want)
	}

	for alias, status := range map[string]int{"base": http.StatusOK, "python": http.StatusOK, "nope": http.StatusNotFound, "elsewhere": http.StatusNotFound} {
		r := h.call(t, http.MethodGet, "/templates/aliases/"+alias, h.apiKey, nil)
		if r.status != status {
			t.Errorf("GET /templates/aliases/%s: %d %s; want %d", alias, r.status, r.body, status)
			continue
		}
		if status == http.StatusNotFound && r.code(t) != http.StatusNotFound {
			t.Errorf("alias %s: error body code %d, want 404", alias, r.code(t))
		}
		if status == http.StatusOK {
			var a e2bapi.TemplateAlias
			r.into(t, &a)
			if a.TemplateID != "python" {
				t.Errorf("alias %s names template %q, want python", alias, a.TemplateID)
			}
		}
	}
	if r := h.call(t, http.MethodGet, "/templates", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("GET /templates without a key: %d, want 401", r.status)
	}
	var other []e2bapi.Template
	h.call(t, http.MethodGet, "/templates", h.otherKey, nil).into(t, &other)
	if len(other) != 1 || other[0].TemplateID != "elsewhere" {
		t.Errorf("the other namespace's key lists %+v; want only its pool elsewhere", other)
	}
	if r := h.call(t, http.MethodPost, "/v3/templates", h.apiKey, map[string]any{"name": "x"}); r.status != http.StatusNotImplemented {
		t.Errorf("template build: %d %s; want 501", r.status, r.body)
	}
}
