package e2bfrontdoor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

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

	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	return cfg
}

// routerObject decodes the one object of kind in config/router/file.
func routerObject[T any](t testing.TB, file, kind string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "router", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
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
