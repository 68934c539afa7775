package api

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// toUnstructured turns a typed object into one whose fields a test can set to values the Go
// types cannot express, such as a missing required field.
func toUnstructured(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	gvk, err := env.Client.GroupVersionKindFor(obj)
	if err != nil {
		t.Fatalf("kind of %T: %v", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("converting %T: %v", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

func set(value any, path ...string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error { return unstructured.SetNestedField(u.Object, value, path...) }
}

func remove(path ...string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		unstructured.RemoveNestedField(u.Object, path...)
		return nil
	}
}

// TestInvalidObjectsAreRejected proves that each enum, bound and required field is enforced at
// admission, with an error that names the offending field, and that nothing is stored.
func TestInvalidObjectsAreRejected(t *testing.T) {
	ns := env.Namespace(t)
	sandbox := builder.MakeSandbox("bad", ns).Obj()
	template := builder.MakeTemplate("bad", ns).Obj()
	pool := builder.MakeWarmPool("bad", ns, "tpl").Obj()
	claim := builder.MakeClaim("bad", ns, "pool").Obj()

	tests := []struct {
		name      string
		obj       client.Object
		mutate    func(*unstructured.Unstructured) error
		wantField string
	}{
		{"sandbox operatingMode", sandbox, set("Paused", "spec", "operatingMode"), "spec.operatingMode"},
		{"sandbox shutdownPolicy", sandbox, set("Forget", "spec", "shutdownPolicy"), "spec.shutdownPolicy"},
		{"sandbox shutdownTime", sandbox, set("tomorrow", "spec", "shutdownTime"), "spec.shutdownTime"},
		{"sandbox without podTemplate", sandbox, remove("spec", "podTemplate"), "spec.podTemplate"},
		{"sandbox without spec", sandbox, remove("spec"), "spec"},
		{"template networkPolicyManagement", template, set("Sometimes", "spec", "networkPolicyManagement"), "spec.networkPolicyManagement"},
		{"template envVarsInjectionPolicy", template, set("Always", "spec", "envVarsInjectionPolicy"), "spec.envVarsInjectionPolicy"},
		{"template volumeClaimTemplatesPolicy", template, set("Always", "spec", "volumeClaimTemplatesPolicy"), "spec.volumeClaimTemplatesPolicy"},
		{"template without podTemplate", template, remove("spec", "podTemplate"), "spec.podTemplate"},
		{"pool negative replicas", pool, set(int64(-1), "spec", "replicas"), "spec.replicas"},
		{"pool updateStrategy type", pool, set("Rolling", "spec", "updateStrategy", "type"), "spec.updateStrategy.type"},
		{"pool without template ref", pool, remove("spec", "sandboxTemplateRef"), "spec.sandboxTemplateRef"},
		{"pool empty template name", pool, set("", "spec", "sandboxTemplateRef", "name"), "spec.sandboxTemplateRef.name"},
		{"claim without warmPoolRef", claim, remove("spec", "warmPoolRef"), "spec.warmPoolRef"},
		{"claim empty pool name", claim, set("", "spec", "warmPoolRef", "name"), "spec.warmPoolRef.name"},
		{"claim shutdownPolicy", claim, set("Never", "spec", "lifecycle", "shutdownPolicy"), "spec.lifecycle.shutdownPolicy"},
		{"claim negative ttl", claim, set(int64(-5), "spec", "lifecycle", "ttlSecondsAfterFinished"), "spec.lifecycle.ttlSecondsAfterFinished"},
		{"claim env without value", claim, set([]any{map[string]any{"name": "A"}}, "spec", "env"), "spec.env[0].value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := framework.Context(t, 30*time.Second)
			u := toUnstructured(t, tt.obj)
			if err := tt.mutate(u); err != nil {
				t.Fatalf("mutating: %v", err)
			}
			err := env.Client.Create(ctx, u)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create returned %v, want an Invalid error naming %s", err, tt.wantField)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %q does not name the field %s", err, tt.wantField)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()); !apierrors.IsNotFound(err) {
				t.Errorf("after a rejected create, get returned %v, want NotFound", err)
			}
		})
	}
}
