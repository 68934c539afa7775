package egressnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/dist"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestBundleLimitsWritesToItsNode installs dist/paddock-egress.yaml's RBAC and admission policy
// on a real API server and plays a stolen paddock-egress token: the token of the instance on
// node-a writes the status annotation of node-a's Pods and nothing else: not a Pod of node-b,
// not a label or another annotation, and a token bound to no Pod on a node writes nothing.
func TestBundleLimitsWritesToItsNode(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	objs, err := framework.DecodeManifests(dist.EgressBundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"paddock-system"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	for _, u := range objs {
		if u.GetKind() == "DaemonSet" {
			continue // nothing runs it here; the agent Pod below stands for one of its Pods
		}
		if err := env.Client.Create(ctx, u); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("creating %s %s from dist/paddock-egress.yaml: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, n := range []string{"node-a", "node-b"} {
		if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, ns, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{egress.PolicyAnnotation: `{"deny":["0.0.0.0/0"]}`}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		framework.MustCreate(t, ctx, env.Client, p)
		return p
	}
	ns := env.Namespace(t)
	mine, theirs := pod("mine", ns, "node-a"), pod("theirs", ns, "node-b")
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "paddock-egress"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "paddock-egress", Containers: []corev1.Container{{Name: "c", Image: "paddock-egress"}}}}
	framework.MustCreate(t, ctx, env.Client, agent)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), agent) })

	token := func(bound *corev1.Pod) string {
		spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}
		if bound != nil {
			spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: bound.Name, UID: bound.UID}
		}
		tr, err := cs.CoreV1().ServiceAccounts("paddock-egress").CreateToken(ctx, "paddock-egress", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	as := func(tok string) kubernetes.Interface {
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tok
		return kubernetes.NewForConfigOrDie(cfg)
	}
	nodeA, unbound := as(token(agent)), as(token(nil))
	patch := func(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, labels, annotations map[string]string) error {
		meta := map[string]any{}
		if labels != nil {
			meta["labels"] = labels
		}
		if annotations != nil {
			meta["annotations"] = annotations
		}
		body, _ := json.Marshal(map[string]any{"metadata": meta})
		_, err := c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	status := map[string]string{egress.StatusAnnotation: `{"policy":"x","applied":true}`}

	// The control: its own node's Pod, its own annotation. The policy takes effect a moment
	// after it is created, so the refusals are polled for.
	if err := patch(ctx, nodeA, mine, nil, status); err != nil {
		t.Fatalf("node-a's instance writing the status of node-a's Pod: %v", err)
	}
	for _, tc := range []struct {
		what        string
		c           kubernetes.Interface
		p           *corev1.Pod
		labels, ann map[string]string
		want        string
	}{
		{"node-a's token on node-b's Pod", nodeA, theirs, nil, status, "may only write Pods of its own node"},
		{"node-a's token setting a label", nodeA, mine, map[string]string{"owned": "yes"}, nil, "may change only the paddock.dev/egress-status annotation"},
		{"node-a's token changing the policy", nodeA, mine, nil, map[string]string{egress.PolicyAnnotation: `{"allow":["*"]}`}, "may change only the paddock.dev/egress-status annotation"},
		{"a token bound to no Pod", unbound, mine, nil, status, "the token is not bound to a Pod on a node"},
	} {
		framework.Eventually(t, func(ctx context.Context) error {
			err := patch(ctx, tc.c, tc.p, tc.labels, tc.ann)
			if err == nil {
				return fmt.Errorf("%s: admitted", tc.what)
			}
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				return fmt.Errorf("%s: %v; want a refusal saying %q", tc.what, err, tc.want)
			}
			return nil
		})
	}
	var got corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mine), &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["owned"] != "" || got.Annotations[egress.PolicyAnnotation] != mine.Annotations[egress.PolicyAnnotation] {
		t.Errorf("a refused write changed the Pod: labels %v, policy %q", got.Labels, got.Annotations[egress.PolicyAnnotation])
	}
}
