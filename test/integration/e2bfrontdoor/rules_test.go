package e2bfrontdoor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/egressnode"
	"github.com/paddock-dev/paddock/internal/egressproxy"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// A fork keeps its network.rules when its source goes (issue 29). The forks' claims become
// owners of the source's rules Secret beside the source's, so deleting the source (E2B kill, then
// the garbage collector's rule, which envtest does not run: collectGarbage) leaves it to them, and
// paddock-egress's reconciler, run here on a fork's Pod, applies the fork's policy with the
// source's header value: the fork's Sandbox reports EgressPolicy Applied. A fork's network update
// gives up its share only; the last owner's deletes the Secret. The front door runs with the
// router's install RBAC and admission policy (asRouter), which allow exactly these writes.
func TestForkKeepsItsRulesWhenTheSourceGoes(t *testing.T) {
	h := startAs(t, 1, "", asRouter)
	playCaptures(t, h)
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	rules := func(value string) map[string]any {
		return map[string]any{"allowOut": []string{"api.example.test"}, "denyOut": []string{e2bapi.AllTraffic},
			"rules": map[string]any{"api.example.test": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": value}}}}}}
	}
	src := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base", "network": rules("Bearer sk-source")})
	srcClaim := h.claim(t, src.SandboxID)
	shared := srcClaim.Annotations[e2bapi.RulesSecretAnnotation]
	if shared == "" {
		t.Fatalf("the source's claim names no rules Secret: %v", srcClaim.Annotations)
	}

	r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/fork", h.apiKey, map[string]any{"count": 2, "timeout": 600})
	if r.status != http.StatusCreated {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	var forks []struct {
		Sandbox *created      `json:"sandbox"`
		Error   *e2bapi.Error `json:"error"`
	}
	r.into(t, &forks)
	var claims []*extensionsv1beta1.SandboxClaim
	for i, f := range forks {
		if f.Sandbox == nil {
			t.Fatalf("fork %d: %s; want a sandbox", i, r.body)
		}
		c := h.claim(t, f.Sandbox.SandboxID)
		if c.Annotations[e2bapi.RulesSecretAnnotation] != shared || c.Annotations[egress.PolicyAnnotation] != srcClaim.Annotations[egress.PolicyAnnotation] {
			t.Errorf("fork %d claim: rules Secret %q, policy %q; want the source's %q and %q", i, c.Annotations[e2bapi.RulesSecretAnnotation],
				c.Annotations[egress.PolicyAnnotation], shared, srcClaim.Annotations[egress.PolicyAnnotation])
		}
		claims = append(claims, c)
	}
	wantOwners(t, ctx, h.ns, shared, srcClaim, claims[0], claims[1])

	// The source goes; the garbage collector keeps a dependent that has an owner left.
	if r := h.call(t, http.MethodDelete, "/sandboxes/"+src.SandboxID, h.apiKey, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill of the source: %d %s", r.status, r.body)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(srcClaim), &extensionsv1beta1.SandboxClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the source's claim is still there (%v)", err)
		}
		return nil
	})
	collectGarbage(t, ctx, h.ns)
	wantOwners(t, ctx, h.ns, shared, claims[0], claims[1])

	// paddock-egress applies the fork's policy with the source's value.
	sb := h.boundSandbox(t, claims[0])
	proxy := &recordingProxy{}
	rec := &egressnode.Reconciler{Client: env.Client, Secrets: env.Client, Proxy: proxy, Rules: nopFirewall{}}
	framework.Eventually(t, func(ctx context.Context) error {
		var pod corev1.Pod
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: sb.Name}, &pod); err != nil {
			return err
		}
		if pod.Annotations[egress.PolicyAnnotation] == "" || pod.Status.PodIP == "" {
			return fmt.Errorf("the fork's Pod has no policy or address yet")
		}
		_, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&pod)})
		return err
	})
	if got := proxy.values(); !slices.Contains(got, "Bearer sk-source") {
		t.Errorf("paddock-egress's proxy got header values %q for the fork; want the source's Bearer sk-source", got)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		var s agentsv1beta1.Sandbox
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), &s); err != nil {
			return err
		}
		return builder.HasCondition(s.Status.Conditions, agentsv1beta1.SandboxConditionEgressPolicy, metav1.ConditionTrue, agentsv1beta1.SandboxReasonEgressApplied)
	})

	// A fork's update gives up its share; the last owner's update deletes the Secret.
	if r := h.call(t, http.MethodPut, "/sandboxes/"+claims[0].Name+"/network", h.apiKey, rules("Bearer sk-fork")); r.status != http.StatusNoContent {
		t.Fatalf("network update of fork 0: %d %s", r.status, r.body)
	}
	wantOwners(t, ctx, h.ns, shared, claims[1])
	if r := h.call(t, http.MethodPut, "/sandboxes/"+claims[1].Name+"/network", h.apiKey, map[string]any{}); r.status != http.StatusNoContent {
		t.Fatalf("network update of fork 1: %d %s", r.status, r.body)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: shared}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the shared rules Secret after its last owner's update: %v; want it deleted", err)
	}
	fork0 := h.claim(t, claims[0].Name)
	var policy egress.Policy
	if err := json.Unmarshal([]byte(fork0.Annotations[egress.PolicyAnnotation]), &policy); err != nil {
		t.Fatal(err)
	}
	own := fork0.Annotations[e2bapi.RulesSecretAnnotation]
	if own == shared || len(policy.Inject) != 1 || policy.Inject[0].Headers[0].SecretKeyRef.Name != own {
		t.Errorf("fork 0 after its update: rules Secret %q, policy %+v; want a Secret of its own that the policy reads", own, policy)
	}
	wantOwners(t, ctx, h.ns, own, fork0)
}

// wantOwners fails unless Secret name in ns is owned by exactly claims.
func wantOwners(t *testing.T, ctx context.Context, ns, name string, claims ...*extensionsv1beta1.SandboxClaim) {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Errorf("rules Secret %s: %v", name, err)
		return
	}
	var got, want []string
	for _, o := range s.OwnerReferences {
		got = append(got, o.Kind+"/"+o.Name+"/"+string(o.UID))
	}
	for _, c := range claims {
		want = append(want, "SandboxClaim/"+c.Name+"/"+string(c.UID))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rules Secret %s owners %v; want %v", name, got, want)
	}
}

// collectGarbage does for the Secrets of ns what the garbage collector (which envtest does not
// run) does for dependents of SandboxClaims: a Secret none of whose owners exists any more is
// deleted; one with an owner left loses the references to the owners that are gone.
func collectGarbage(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	var secrets corev1.SecretList
	if err := env.Client.List(ctx, &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if len(s.OwnerReferences) == 0 {
			continue
		}
		var live []metav1.OwnerReference
		for _, o := range s.OwnerReferences {
			var c extensionsv1beta1.SandboxClaim
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: o.Name}, &c)
			switch {
			case err == nil && c.UID == o.UID:
				live = append(live, o)
			case err != nil && !apierrors.IsNotFound(err):
				t.Fatal(err)
			}
		}
		switch {
		case len(live) == 0:
			if err := env.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		case len(live) < len(s.OwnerReferences):
			s.OwnerReferences = live
			if err := env.Client.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// recordingProxy is paddock-egress's proxy table as the reconciler fills it.
type recordingProxy struct {
	mu  sync.Mutex
	set map[netip.Addr]*egressproxy.Sandbox
}

func (p *recordingProxy) Set(addr netip.Addr, sb *egressproxy.Sandbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set = map[netip.Addr]*egressproxy.Sandbox{}
	}
	p.set[addr] = sb
}

func (p *recordingProxy) Delete(addr netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.set, addr)
}

// values are the header values the table holds, for every address.
func (p *recordingProxy) values() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, sb := range p.set {
		for _, v := range sb.Secrets {
			out = append(out, v)
		}
	}
	return out
}

// nopFirewall stands for the node's iptables, which test/integration/egressnode and
// internal/egressnode's kernel test prove.
type nopFirewall struct{}

func (nopFirewall) Sync(context.Context, []netip.Addr) error { return nil }
