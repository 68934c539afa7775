package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// testPaddockClaim is the README quickstart as a test: with the controller that `paddock dev up`
// installed as a real pod, a warm pool of the default sandbox image (sandboxd) fills on the real
// node, the SDK claims a sandbox and runs echo in it, and the claim's identity is on the Pod.
func testPaddockClaim(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	applyExample(t, ctx, c, ns, "sandboxd-template.yaml")
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("sandboxd", ns, "sandboxd").Replicas(1).Obj())

	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := paddock.Claim(ctx, sdk.ClaimOptions{WarmPool: "sandboxd", Namespace: ns})
	if err != nil {
		t.Fatalf("claiming a sandbox: %v", err)
	}
	defer func() {
		if err := sb.Release(context.Background()); err != nil {
			t.Errorf("releasing the claim: %v", err)
		}
	}()
	rt, err := sb.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	// The pool member may still be finishing its start when the claim adopts it; the runtime
	// retries refused connections.
	res, err := rt.Run(ctx, "echo hello")
	if err != nil {
		t.Fatalf("running echo in %s: %v", sb.SandboxName(), err)
	}
	if res.Stdout != "hello\n" || res.ExitCode != 0 {
		t.Errorf("echo hello gave stdout %q, exit code %d; want \"hello\\n\", 0", res.Stdout, res.ExitCode)
	}
	res, err = rt.Run(ctx, "sh -c 'exit 3'")
	if err != nil || res.ExitCode != 3 {
		t.Errorf("exit 3 gave %+v, %v; want exit code 3", res, err)
	}

	framework.Eventually(t, func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.SandboxName()}, pod); err != nil {
			return err
		}
		if pod.Annotations[agentsv1beta1.ClaimNameAnnotation] != sb.ClaimName() || pod.Labels[agentsv1beta1.ClaimUIDLabel] == "" {
			return fmt.Errorf("pod %s carries claim labels %v and annotations %v", pod.Name, pod.Labels, pod.Annotations)
		}
		if pod.Spec.NodeName == "" || strings.HasPrefix(pod.Spec.NodeName, "kwok") {
			return fmt.Errorf("pod runs on node %q, want the real node", pod.Spec.NodeName)
		}
		return nil
	})
}

// applyExample creates the objects of one manifest under examples/ in ns.
func applyExample(t *testing.T, ctx context.Context, c client.Client, ns, file string) {
	t.Helper()
	objs, err := framework.ReadExample(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		u.SetNamespace(ns)
		if u.GetKind() == "SandboxTemplate" {
			if rc, found, _ := unstructured.NestedString(u.Object, "spec", "podTemplate", "spec", "runtimeClassName"); found {
				spec := &corev1.PodSpec{RuntimeClassName: &rc}
				if withoutMissingRuntimeClass(t, spec); spec.RuntimeClassName == nil {
					unstructured.RemoveNestedField(u.Object, "spec", "podTemplate", "spec", "runtimeClassName")
				}
			}
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s from examples/%s: %v", u.GetKind(), u.GetName(), file, err)
		}
	}
}
