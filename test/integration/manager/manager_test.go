// Package manager tests the controller manager as main assembles it: options, manager, indexes,
// controllers, health endpoints and leader election, on a real API server.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }

// freeAddr returns a loopback address with a port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// instance is one controller-manager process, as main would build it.
type instance struct {
	health string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, o *manager.Options) *instance {
	t.Helper()
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
	in := &instance{health: o.HealthProbeBindAddress, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- mgr.Start(ctx) }()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	if in.cancel == nil {
		return
	}
	in.cancel()
	if err := <-in.done; err != nil {
		fmt.Printf("manager stopped with error: %v\n", err)
	}
	in.cancel = nil
}

func options(t *testing.T, leaseNamespace string) *manager.Options {
	o := manager.NewOptions()
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = freeAddr(t)
	o.LeaderElectionNamespace = leaseNamespace
	o.AllowDuplicateControllers = true
	o.CredentialsSecret = leaseNamespace + "/" + credentials.KeySecretName // the controller's namespace
	return o
}

// podOf waits for the Sandbox's Pod, proving a controller is reconciling.
func podOf(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	})
}

func TestManagerServesHealthAndReconciles(t *testing.T) {
	ns := env.Namespace(t)
	in := start(t, options(t, ns))

	framework.Eventually(t, func(ctx context.Context) error {
		return errors.Join(framework.GetOK(ctx, "http://"+in.health+"/healthz"), framework.GetOK(ctx, "http://"+in.health+"/readyz"))
	})
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeSandbox("through-main", ns).Obj())
	podOf(t, ns, "through-main")
}

// TestLeaderHandover runs two managers on one Lease: the second takes over when the leader stops,
// and work continues.
func TestLeaderHandover(t *testing.T) {
	ns := env.Namespace(t)
	first := start(t, options(t, ns))
	lease := &coordinationv1.Lease{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: manager.NewOptions().LeaderElectionID}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("lease has no holder yet")
		}
		return nil
	})
	firstHolder := *lease.Spec.HolderIdentity
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeSandbox("before-handover", ns).Obj())
	podOf(t, ns, "before-handover")

	start(t, options(t, ns))
	first.stop() // releases the Lease on cancel

	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			return err
		}
		if h := lease.Spec.HolderIdentity; h == nil || *h == "" || *h == firstHolder {
			return fmt.Errorf("lease still held by %v", h)
		}
		return nil
	})
	framework.MustCreate(t, ctx, env.Client, builder.MakeSandbox("after-handover", ns).Obj())
	podOf(t, ns, "after-handover")
}

// TestWarmClaimThroughAllControllers runs every controller as main wires them with --extensions:
// the pool fills, its member's Pod becomes Ready (the test plays the kubelet), a claim adopts it,
// and the claim's identity reaches the Pod.
func TestWarmClaimThroughAllControllers(t *testing.T) {
	ns := env.Namespace(t)
	o := options(t, ns)
	o.Extensions = true
	start(t, o)
	ctx := framework.Context(t, framework.DefaultTimeout)

	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("tpl", ns).Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj())

	var member agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		list := &agentsv1beta1.SandboxList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("pool has %d members, want 1", len(list.Items))
		}
		member = list.Items[0]
		return nil
	})
	podOf(t, ns, member.Name)
	if _, err := framework.MarkPodReady(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: member.Name}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		pool := &extensionsv1beta1.SandboxWarmPool{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool); err != nil {
			return err
		}
		if pool.Status.ReadyReplicas != 1 {
			return fmt.Errorf("pool readyReplicas = %d, want 1", pool.Status.ReadyReplicas)
		}
		return nil
	})

	claim := builder.MakeClaim("claim", ns, "pool").Obj()
	framework.MustCreate(t, ctx, env.Client, claim)
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if claim.Status.Sandbox.Name != member.Name {
			return fmt.Errorf("claim bound to %q, want the warm member %q", claim.Status.Sandbox.Name, member.Name)
		}
		return builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, "")
	})
	framework.Eventually(t, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: member.Name}, pod); err != nil {
			return err
		}
		if got := pod.Labels[agentsv1beta1.ClaimUIDLabel]; got != string(claim.UID) {
			return fmt.Errorf("pod claim-uid label = %q, want %q", got, claim.UID)
		}
		if got := pod.Annotations[agentsv1beta1.ClaimNameAnnotation]; got != claim.Name {
			return fmt.Errorf("pod claim-name annotation = %q, want %q", got, claim.Name)
		}
		return nil
	})
}
