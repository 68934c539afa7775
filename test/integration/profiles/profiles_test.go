// Package profiles checks the install profiles that make upstream's SDK defaults work: the
// agent-sandbox-system profile (and its dist/ rendering) and the per-namespace router, rendered
// with the pinned kustomize and applied to a real API server, whose RBAC decides what the
// per-namespace router may do.
package profiles

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

const upstreamNamespace = "agent-sandbox-system"

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// keys are the sorted keys of objs, to compare what two renderings hold.
func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, key(u))
	}
	slices.Sort(out)
	return out
}

// apply server-side applies every object, as `kubectl apply --server-side` does.
func apply(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s: %v", key(u), err)
		}
	}
}

func containerArgs(t *testing.T, objs []*unstructured.Unstructured, deployment string) []string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" && u.GetName() == deployment {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			return args
		}
	}
	t.Fatalf("no Deployment %s", deployment)
	return nil
}

// lastFlag is the value of the last occurrence of --name, the one the binary uses.
func lastFlag(args []string, name string) (string, bool) {
	for _, a := range slices.Backward(args) {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestAgentSandboxSystemProfile renders config/profiles/agent-sandbox-system: every namespaced
// object in agent-sandbox-system, the router reachable as sandbox-router-svc:8080 there with
// the key of that namespace, no E2B objects (their namespace would collide), and the API server
// takes all of it.
func TestAgentSandboxSystemProfile(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	objs, err := framework.Kustomize(ctx, filepath.Join(framework.RepoRoot(), "config", "profiles", upstreamNamespace))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" && ns != upstreamNamespace {
			t.Errorf("%s is outside %s", key(u), upstreamNamespace)
		}
		if u.GetKind() == "Namespace" && u.GetName() != upstreamNamespace {
			t.Errorf("the profile creates namespace %s", u.GetName())
		}
	}
	var svc *corev1.Service
	for _, u := range objs {
		if u.GetKind() == "Service" && u.GetName() == "sandbox-router-svc" {
			svc = &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("Service sandbox-router-svc = %+v, want one port 8080", svc)
	}
	router := containerArgs(t, objs, "paddock-router")
	want := map[string]string{"credentials-secret": upstreamNamespace + "/" + credentials.KeySecretName, "authz-mode": "tokenreview", "e2b-bind-address": ""}
	for name, value := range want {
		if got, ok := lastFlag(router, name); !ok || got != value {
			t.Errorf("router --%s = %q (given %v), want %q", name, got, ok, value)
		}
	}
	if got, _ := lastFlag(containerArgs(t, objs, "paddock-controller"), "router-namespace"); got != upstreamNamespace {
		t.Errorf("controller --router-namespace = %q, want %s", got, upstreamNamespace)
	}
	apply(t, ctx, objs)
}

// TestDistAgentSandboxSystemIsTheProfile: the files of dist/agent-sandbox-system together hold
// exactly the profile's objects, each file under the 1 MiB rule.
func TestDistAgentSandboxSystemIsTheProfile(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	objs, err := framework.Kustomize(ctx, filepath.Join(framework.RepoRoot(), "config", "profiles", upstreamNamespace))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(framework.RepoRoot(), "dist", upstreamNamespace)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bundle files in %s (make dist): %v", dir, err)
	}
	var fromDist []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 1<<20 {
			t.Errorf("%s is %d bytes, over 1 MiB", f, len(data))
		}
		got, err := framework.DecodeManifests(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		fromDist = append(fromDist, got...)
	}
	if got, want := keys(fromDist), keys(objs); !slices.Equal(got, want) {
		t.Errorf("dist/%s holds %v,\nthe profile renders %v (run make dist)", upstreamNamespace, got, want)
	}
}

// TestNamespaceRouterHasOnlyItsNamespace installs config/namespace-router into two namespaces
// side by side, then asks the API server's authorizer what each router's ServiceAccount may do:
// read Sandboxes and Secrets of its own namespace, review tokens and access, and nothing of the
// other namespace or of the controller's (the credentials key).
func TestNamespaceRouterHasOnlyItsNamespace(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	teamA, teamB, controllerNS := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{teamA, teamB} {
		objs, err := framework.BuildNamespaceRouter(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		var clusterScoped []string
		for _, u := range objs {
			if u.GetNamespace() == "" {
				clusterScoped = append(clusterScoped, key(u))
			} else if u.GetNamespace() != ns {
				t.Errorf("%s is outside %s", key(u), ns)
			}
		}
		if want := []string{"ClusterRoleBinding /paddock-router-auth-delegator-" + ns}; !slices.Equal(clusterScoped, want) {
			t.Errorf("cluster-scoped objects for %s: %v, want %v", ns, clusterScoped, want)
		}
		args := containerArgs(t, objs, "paddock-router")
		for name, value := range map[string]string{"sandbox-token-source": "sandbox-secrets", "sandbox-namespaces": "$(POD_NAMESPACE)", "authz-mode": "tokenreview", "inject-sandbox-token": "true"} {
			if got, _ := lastFlag(args, name); got != value {
				t.Errorf("router --%s = %q, want %q", name, got, value)
			}
		}
		apply(t, ctx, objs)
		t.Cleanup(func() {
			for _, u := range objs {
				if u.GetNamespace() == "" {
					_ = env.Client.Delete(context.Background(), u)
				}
			}
		})
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + teamA + ":paddock-router"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + teamA, "system:authenticated"}
	cases := []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Namespace: teamA, Verb: "watch", Group: "agents.x-k8s.io", Resource: "sandboxes"}, true},
		{authorizationv1.ResourceAttributes{Namespace: teamA, Verb: "patch", Group: "agents.x-k8s.io", Resource: "sandboxes"}, true},
		{authorizationv1.ResourceAttributes{Namespace: teamA, Verb: "watch", Resource: "secrets"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, true},
		{authorizationv1.ResourceAttributes{Namespace: teamB, Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: teamB, Verb: "list", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "agents.x-k8s.io", Resource: "sandboxes"}, false},
		{authorizationv1.ResourceAttributes{Namespace: controllerNS, Verb: "get", Resource: "secrets", Name: credentials.KeySecretName}, false},
		{authorizationv1.ResourceAttributes{Namespace: teamA, Verb: "create", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Namespace: teamA, Verb: "create", Group: "extensions.agents.x-k8s.io", Resource: "sandboxclaims"}, false},
	}
	for _, tc := range cases {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: &tc.attrs}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != tc.want {
			t.Errorf("%s may %s %s/%s in %q (name %q): %v, want %v", user, tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource,
				tc.attrs.Namespace, tc.attrs.Name, got.Status.Allowed, tc.want)
		}
	}
}

const migrationProfile = "upstream-unauthenticated-migration"

// TestUpstreamUnauthenticatedMigrationProfile renders the migration profile: the default install
// with the three loud flags (sandboxd tokenless from the pod network, labelled client Pods at the
// router and in the managed NetworkPolicy), the router's watch on Pods, the same objects as
// dist/upstream-unauthenticated-migration.yaml, and an API server that takes all of it and lets
// the router list Pods.
func TestUpstreamUnauthenticatedMigrationProfile(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	objs, err := framework.Kustomize(ctx, filepath.Join(framework.RepoRoot(), "config", "profiles", migrationProfile))
	if err != nil {
		t.Fatal(err)
	}
	clientLabel := agentsv1beta1.SandboxClientLabel + "=true"
	for deployment, flags := range map[string]map[string]string{
		"paddock-controller": {"sandbox-client-pod-labels": clientLabel, "sandboxd-allow-unauthenticated-network": "true"},
		"paddock-router":     {"unauthenticated-client-pod-labels": clientLabel, "authz-mode": "tokenreview"},
	} {
		args := containerArgs(t, objs, deployment)
		for name, value := range flags {
			if got, ok := lastFlag(args, name); !ok || got != value {
				t.Errorf("%s --%s = %q (given %v), want %q", deployment, name, got, ok, value)
			}
		}
		if _, ok := lastFlag(args, "accept-port-forward"); ok {
			t.Errorf("%s sets --accept-port-forward; the profile keeps the default", deployment)
		}
	}
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "dist", migrationProfile+".yaml"))
	if err != nil {
		t.Fatalf("reading the rendered profile (make dist): %v", err)
	}
	fromDist, err := framework.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(fromDist), keys(objs); !slices.Equal(got, want) {
		t.Errorf("dist/%s.yaml holds %v,\nthe profile renders %v (run make dist)", migrationProfile, got, want)
	}
	apply(t, ctx, objs)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:paddock-system:paddock-router", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods"}}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Status.Allowed {
		t.Errorf("the profile's router may not watch Pods: %+v", got.Status)
	}
}
