package e2bfrontdoor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/test/framework"
)

// asRouter is the identity of the router's install: a ServiceAccount bound to the ClusterRole of
// config/router/role.yaml and to the API-key Role of config/router/e2b_secrets.yaml in h's key
// namespace, nothing else. A front door built with it proves that the install's RBAC is enough
// for what the test drives (and the API server refuses anything more).
func asRouter(t testing.TB, h *harness) *rest.Config {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	sa := "paddock-router"
	token := framework.ServiceAccountToken(t, env.Config, h.keysNS, sa)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: h.keysNS}}

	cluster := routerObject[rbacv1.ClusterRole](t, "role.yaml", "ClusterRole")
	cluster.Name += "-" + h.keysNS // cluster-scoped: one per test
	framework.MustCreate(t, ctx, env.Client, cluster)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cluster.Name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster.Name}}
	framework.MustCreate(t, ctx, env.Client, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), cluster)
	})

	keys := routerObject[rbacv1.Role](t, "e2b_secrets.yaml", "Role")
	keys.Namespace = h.keysNS
	framework.MustCreate(t, ctx, env.Client, keys)
	framework.MustCreate(t, ctx, env.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: keys.Name, Namespace: h.keysNS}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: keys.Name}})

	// The admission policy narrowing the router's Secret writes, for this test's service account.
	for _, u := range routerObjects(t, "secret_writes.yaml") {
		u.SetName(u.GetName() + "-" + h.keysNS)
		if u.GetKind() == "ValidatingAdmissionPolicy" {
			conds, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
			cond := conds[0].(map[string]any)
			cond["expression"] = strings.Replace(cond["expression"].(string), "paddock-system:", h.keysNS+":", 1)
			_ = unstructured.SetNestedSlice(u.Object, conds, "spec", "matchConditions")
		} else {
			_ = unstructured.SetNestedField(u.Object, u.GetName(), "spec", "policyName")
		}
		framework.MustCreate(t, ctx, env.Client, u)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}

	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	return cfg
}

// routerObjects decodes config/router/file.
func routerObjects(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "router", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// A leaked router token (the install's RBAC and admission policy) can create, patch and delete
// Secrets only as the E2B front door does: e2b-egress-* names, owned by a SandboxClaim, Opaque,
// with the front door's label and no finalizer, and patches that change only the SandboxClaim
// owners. It cannot create any other Secret (a service-account token Secret, say), nor rewrite,
// hold (a finalizer) or delete a user's, nor reach a user's Secret that happens to be named
// e2b-egress-* (an owner added would have the garbage collector delete it with that claim, and
// the patch answer would show its values).
func TestRouterSecretWritesAreNarrowed(t *testing.T) {
	h := &harness{ns: env.Namespace(t), keysNS: env.Namespace(t)}
	ctx := framework.Context(t, framework.DefaultTimeout)
	router, err := client.New(asRouter(t, h), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "c", UID: "0d3c1a7e-0000-4000-8000-000000000001"}}
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: h.ns}, Data: map[string][]byte{"k": []byte("v")}}
	framework.MustCreate(t, ctx, env.Client, users)
	// A user's Secret with the front door's kind of name and a claim owner, but not its label.
	lookalike := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-users", Namespace: h.ns, OwnerReferences: owner},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
	framework.MustCreate(t, ctx, env.Client, lookalike)
	marked := map[string]string{e2bapi.SandboxLabel: "true"}
	// Wait until the policy is in force: the API server loads it asynchronously.
	framework.Eventually(t, func(context.Context) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: h.ns}}
		if err := router.Create(ctx, s); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			_ = env.Client.Delete(ctx, s)
			return fmt.Errorf("creating Secret plain as the router: %v, want refused by the admission policy", err)
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
	}{
		{"no owner", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-noowner", Namespace: h.ns, Labels: marked}}},
		{"service-account token", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-sa", Namespace: h.ns, OwnerReferences: owner, Labels: marked,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}},
		{"no front-door label", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-unmarked", Namespace: h.ns, OwnerReferences: owner},
			Type: corev1.SecretTypeOpaque}},
		{"a finalizer", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-held", Namespace: h.ns, OwnerReferences: owner, Labels: marked,
			Finalizers: []string{"example.test/hold"}}, Type: corev1.SecretTypeOpaque}},
	} {
		if err := router.Create(ctx, tc.s); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: creating Secret %s as the router: %v, want refused", tc.name, tc.s.Name, err)
		}
	}
	for _, s := range []*corev1.Secret{users, lookalike} {
		if err := router.Delete(ctx, s.DeepCopy()); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("deleting a user's Secret %s as the router: %v, want refused", s.Name, err)
		}
	}
	ok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "e2b-egress-ok", Namespace: h.ns, OwnerReferences: owner, Labels: marked},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"header-0": []byte("v")}}
	if err := router.Create(ctx, ok); err != nil {
		t.Errorf("creating the front door's kind of Secret as the router: %v", err)
	}
	// Patches: a fork's claim joining the owners, and giving its share up, pass; anything else
	// (the values, a label, the last owner, a non-claim owner, a user's Secret) is refused.
	fork := `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"fork","uid":"0d3c1a7e-0000-4000-8000-000000000002"}`
	smp := func(s *corev1.Secret, patch string) error {
		return router.Patch(ctx, s.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
	}
	if err := smp(ok, `{"metadata":{"ownerReferences":[`+fork+`]}}`); err != nil {
		t.Errorf("adding a fork's claim to the owners of the front door's Secret as the router: %v", err)
	}
	if err := smp(ok, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"0d3c1a7e-0000-4000-8000-000000000002"}]}}`); err != nil {
		t.Errorf("removing one of two owners of the front door's Secret as the router: %v", err)
	}
	for _, tc := range []struct {
		name  string
		s     *corev1.Secret
		patch string
	}{
		{"rewrite the values", ok, `{"data":{"header-0":"c3RvbGVu"}}`},
		{"add a label", ok, `{"metadata":{"labels":{"x":"y"}}}`},
		{"remove the front door's label", ok, `{"metadata":{"labels":{"` + e2bapi.SandboxLabel + `":null}}}`},
		{"add a finalizer (the Secret outlives its claims)", ok, `{"metadata":{"finalizers":["example.test/hold"]}}`},
		{"add a claim owner to a user's e2b-egress-* Secret (collected with that claim)", lookalike, `{"metadata":{"ownerReferences":[` + fork + `]}}`},
		{"remove the last owner", ok, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"0d3c1a7e-0000-4000-8000-000000000001"}]}}`},
		{"add an owner that is no claim", ok, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"0d3c1a7e-0000-4000-8000-000000000003"}]}}`},
		{"patch a user's Secret (its answer would show the values)", users, `{"metadata":{"ownerReferences":[` + fork + `]}}`},
	} {
		if err := smp(tc.s, tc.patch); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s as the router: %v, want refused", tc.name, err)
		}
	}
	if err := router.Delete(ctx, ok); err != nil {
		t.Errorf("deleting the front door's kind of Secret as the router: %v", err)
	}
}

// routerObject decodes the one object of kind in config/router/file.
func routerObject[T any](t testing.TB, file, kind string) *T {
	t.Helper()
	objs := routerObjects(t, file)
	for _, u := range objs {
		if u.GetKind() == kind {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("config/router/%s has no %s", file, kind)
	return nil
}
