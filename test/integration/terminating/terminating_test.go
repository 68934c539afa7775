package terminating

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// passes is how many passes each test drives in the terminating namespace: without the hold,
// every one of them sends a create that the API server refuses.
const passes = 10

// TestPoolInTerminatingNamespaceCreatesOnce: a pool short of members in a namespace being
// deleted asks the API server in one pass, then creates nothing, says why in its condition and
// is not retried through backoff.
func TestPoolInTerminatingNamespaceCreatesOnce(t *testing.T) {
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	c := cachedClient(t)
	ns := env.Namespace(t)
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(2).Obj())
	deleteNamespace(t, ctx, ns)
	pools, err := sandboxwarmpool.New(c, nil, sandboxwarmpool.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "pool"}}
	framework.Eventually(t, func(ctx context.Context) error {
		return c.Get(ctx, req.NamespacedName, &extensionsv1beta1.SandboxWarmPool{})
	})

	before := refusedCreates(t, ctx, "sandboxes")
	var first int
	for i := range passes {
		res, err := pools.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter <= 0 {
			t.Fatalf("pass in the terminating namespace = %+v, %v; want a later look and no error to retry", res, err)
		}
		if i == 0 {
			if first = refusedCreates(t, ctx, "sandboxes") - before; first == 0 {
				t.Fatal("the first pass sent no member create; the test proves nothing")
			}
		}
	}
	if got := refusedCreates(t, ctx, "sandboxes") - before; got != first {
		t.Errorf("%d passes sent %d member creates the API server refused, the first pass %d; want none after the first", passes, got, first)
	}
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		t.Fatal(err)
	}
	if err := builder.HasCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionMembersCreated, metav1.ConditionFalse,
		extensionsv1beta1.PoolReasonNamespaceTerminating); err != nil {
		t.Error(err)
	}
}

// TestSandboxesInTerminatingNamespaceCreateOnce: Sandboxes without their children in a namespace
// being deleted cost one refused create between them, not one per Sandbox and pass.
func TestSandboxesInTerminatingNamespaceCreateOnce(t *testing.T) {
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	c := cachedClient(t)
	ns := env.Namespace(t)
	names := []string{"sb-a", "sb-b", "sb-c"}
	for _, name := range names {
		framework.MustCreate(t, ctx, env.Client, builder.MakeSandbox(name, ns).Image("busybox").Obj())
	}
	deleteNamespace(t, ctx, ns)
	sandboxes, err := sandbox.New(c, nil, sandbox.Options{CredentialsKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		for _, name := range names {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &agentsv1beta1.Sandbox{}); err != nil {
				return err
			}
		}
		return nil
	})

	before := refusedCreates(t, ctx, "secrets") + refusedCreates(t, ctx, "pods")
	for range passes {
		for _, name := range names {
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
			if res, err := sandboxes.Reconcile(ctx, req); err != nil || res.RequeueAfter <= 0 {
				t.Fatalf("pass of %s in the terminating namespace = %+v, %v; want a later look and no error to retry", name, res, err)
			}
		}
	}
	if got := refusedCreates(t, ctx, "secrets") + refusedCreates(t, ctx, "pods") - before; got != 1 {
		t.Errorf("%d passes of %d Sandboxes sent %d creates the API server refused, want 1", passes, len(names), got)
	}
}

// cachedClient starts a manager for its cache and indexes only (no controller runs) and returns
// its client, the one the reconcilers read through in production.
func cachedClient(t *testing.T) client.Client {
	t.Helper()
	var c client.Client
	stop, err := env.StartManager(func(mgr ctrl.Manager) error {
		c = mgr.GetClient()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c
}

// deleteNamespace deletes ns; with no namespace controller it stays Terminating.
func deleteNamespace(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("deleting namespace %s: %v", ns, err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		got := &corev1.Namespace{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: ns}, got); err != nil {
			return err
		}
		if got.Status.Phase != corev1.NamespaceTerminating {
			return fmt.Errorf("namespace %s is %s, want Terminating", ns, got.Status.Phase)
		}
		return nil
	})
}

// refusedCreates reads from the API server's own metrics how many creates of resource it has
// answered 403 Forbidden, the NamespaceLifecycle admission's answer in a terminating namespace.
func refusedCreates(t *testing.T, ctx context.Context, resource string) int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	total := 0
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	scanner.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `code="403"`) ||
			!strings.Contains(line, `verb="POST"`) || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += int(n)
	}
	return total
}
