package manager

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestCacheLabelSelectors checks what the manager's cache holds: with --cache-label-selectors
// only the Pods and Services that carry the sandbox-name-hash label, without it every one.
// The unlabelled objects are created first, so once the cache shows the labelled ones it has
// seen the others too, if it watches them.
func TestCacheLabelSelectors(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache-label-selectors=%t", scoped), func(t *testing.T) {
			ns := env.Namespace(t)
			ctx := framework.Context(t, framework.DefaultTimeout)
			for _, name := range []string{"other", "child"} {
				meta := metav1.ObjectMeta{Namespace: ns, Name: name}
				if name == "child" {
					meta.Labels = map[string]string{agentsv1beta1.SandboxNameHashLabel: "h1"}
				}
				framework.MustCreate(t, ctx, env.Client, &corev1.Pod{ObjectMeta: meta,
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}})
				framework.MustCreate(t, ctx, env.Client, &corev1.Service{ObjectMeta: meta,
					Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}})
			}

			o := options(t, ns)
			o.CacheLabelSelectors = scoped
			cached := startCache(t, o)
			want := []string{"child", "other"}
			if scoped {
				want = []string{"child"}
			}
			framework.Eventually(t, func(ctx context.Context) error {
				var pods corev1.PodList
				var svcs corev1.ServiceList
				if err := cached.List(ctx, &pods, client.InNamespace(ns)); err != nil {
					return err
				}
				if err := cached.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
					return err
				}
				podNames, svcNames := names(pods.Items), names(svcs.Items)
				if !slices.Contains(podNames, "child") || !slices.Contains(svcNames, "child") {
					return fmt.Errorf("cache does not show the labelled objects yet: pods %v, services %v", podNames, svcNames)
				}
				if !slices.Equal(podNames, want) || !slices.Equal(svcNames, want) {
					return fmt.Errorf("cached pods %v and services %v, want %v", podNames, svcNames, want)
				}
				return nil
			})
		})
	}
}

// startCache runs a manager built from o and returns its cached client.
func startCache(t *testing.T, o *manager.Options) client.Client {
	t.Helper()
	o.LeaderElect = false
	if err := o.Validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	mgr, err := manager.NewManager(env.Config, env.Scheme, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := manager.SetupControllers(ctx, mgr, o, noop.NewTracerProvider()); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with error: %v", err)
		}
	})
	return mgr.GetClient()
}

func names[T any, P interface {
	*T
	client.Object
}](items []T) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	slices.Sort(out)
	return out
}
