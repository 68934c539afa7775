package router

import (
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/router/authz"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestTokenReviewWithAccessCheck authenticates a real ServiceAccount token with TokenReview and
// authorizes each sandbox with a SubjectAccessReview against real RBAC: a Role that names one
// sandbox lets the account reach that sandbox only.
func TestTokenReviewWithAccessCheck(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, time.Minute)
	port := upstreams(t, map[string]http.Handler{"127.0.0.10": named("granted"), "127.0.0.11": named("other")})
	createSandbox(t, builder.MakeSandbox("granted", ns).Port("http", int32(port)).ReadyStatus("127.0.0.10"))
	createSandbox(t, builder.MakeSandbox("other", ns).Port("http", int32(port)).ReadyStatus("127.0.0.11"))

	cs := kubernetes.NewForConfigOrDie(env.Config)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reach-granted", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{agentsv1beta1.GroupVersion.Group}, Resources: []string{authz.SandboxAccess.Resource + "/" + authz.SandboxAccess.Subresource},
		Verbs: []string{authz.SandboxAccess.Verb}, ResourceNames: []string{"granted"},
	}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + tr.Status.Token}

	r := startRouter(t, func(c *router.Config) {
		c.AuthzMode = router.AuthzTokenReview
		// A short TTL keeps the RBAC cache of the API server from pinning a stale denial.
		c.TokenReview = authz.TokenReviewOptions{TTL: time.Second, CacheSize: 16}
	})
	r.eventually(t, ns, "granted", port, http.StatusOK, "granted", bearer)
	code, body := r.call(t, http.MethodGet, ns, "other", port, bearer)
	if code != http.StatusForbidden || !strings.Contains(detail(t, body), "may not create sandboxes/proxy on sandbox "+ns+"/other") {
		t.Errorf("ungranted sandbox: %d %q, want 403", code, body)
	}
	code, _ = r.call(t, http.MethodGet, ns, "granted", port, nil)
	if code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	code, _ = r.call(t, http.MethodGet, ns, "granted", port, map[string]string{"Authorization": "Bearer not-a-token"})
	if code != http.StatusUnauthorized {
		t.Errorf("bogus token: %d, want 401", code)
	}
	code, _ = r.call(t, http.MethodGet, ns, "granted", port, map[string]string{"Authorization": "Bearer " + tr.Status.Token, "X-Sandbox-Pod-IP": "127.0.0.11"})
	if code != http.StatusForbidden {
		t.Errorf("pod-IP override: %d, want 403", code)
	}
}
