// Package egressnode proves on a real kube-apiserver that a node's egress component applies
// the policies of Pods as they come, change and go: Secret values reach the proxy, a policy
// that cannot be applied leaves the previous one in force (or none at all: no egress), and the
// outcome is reported on the Pod.
package egressnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/egressnode"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
	"github.com/paddock-dev/paddock/internal/egressproxy"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env   *framework.Env
	proxy *egressproxy.Server
	fw    = &firewall{}
)

// firewall records what the reconciler asks the node's firewall to police; the iptables side
// has its own test against the kernel (internal/egressnode).
type firewall struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (f *firewall) Sync(_ context.Context, addrs []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs = slices.Clone(addrs)
	return nil
}

func (f *firewall) polices(a netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.addrs, a)
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		ca, err := egressproxy.NewCA("test")
		if err != nil {
			return nil, err
		}
		proxy, err = egressproxy.New(egressproxy.Config{
			OriginalDst: egressnode.OriginalDst, UpstreamDNS: "127.0.0.1:53", CA: ca, Log: logr.Discard(),
		})
		if err != nil {
			return nil, err
		}
		return e.StartManager(func(mgr ctrl.Manager) error {
			r := &egressnode.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Proxy: proxy, Rules: fw}
			return r.SetupWithManager(mgr)
		})
	})
}

const withCredential = `{"allow":["api.example.test"],"deny":["0.0.0.0/0"],
 "inject":[{"domain":"api.example.test","headers":[{"name":"Authorization","secretKeyRef":{"name":"api","key":"authorization"}}]}]}`

func makePod(t *testing.T, ctx context.Context, ns, name, ip, policy string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{egress.PolicyAnnotation: policy}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	framework.MustCreate(t, ctx, env.Client, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func setPolicy(t *testing.T, ctx context.Context, pod *corev1.Pod, policy string) {
	t.Helper()
	if err := framework.Get(ctx, env.Client, pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations[egress.PolicyAnnotation] = policy
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// waitStatus waits for the Pod's egress status about policy.
func waitStatus(t *testing.T, pod *corev1.Pod, policy string) egress.Status {
	t.Helper()
	var st egress.Status
	framework.Eventually(t, func(ctx context.Context) error {
		p := pod.DeepCopy()
		if err := framework.Get(ctx, env.Client, p); err != nil {
			return err
		}
		raw, ok := p.Annotations[egress.StatusAnnotation]
		if !ok {
			return errors.New("no egress status on the Pod yet")
		}
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return err
		}
		if st.Policy != egresspolicy.Hash(policy) {
			return fmt.Errorf("status %s is about another policy", raw)
		}
		return nil
	})
	return st
}

func TestPolicyAppliedChangedAndForgotten(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	ip := netip.MustParseAddr("198.18.0.21")
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Data: map[string][]byte{"authorization": []byte("Bearer sk-1")}})
	pod := makePod(t, ctx, ns, "sb", ip.String(), withCredential)

	if st := waitStatus(t, pod, withCredential); !st.Applied {
		t.Fatalf("status %+v, want applied", st)
	}
	sb := proxy.Lookup(ip)
	if sb == nil || sb.Secrets[egress.SecretKeyRef{Name: "api", Key: "authorization"}] != "Bearer sk-1" || !sb.Policy.Names("api.example.test") {
		t.Fatalf("the proxy holds %+v for %s, want the policy with the Secret's value", sb, ip)
	}
	if !fw.polices(ip) {
		t.Fatal("the firewall does not police the Pod")
	}

	// A change that cannot be applied keeps the old policy in force.
	const bad = `{"deny":["example.com"]}`
	setPolicy(t, ctx, pod, bad)
	st := waitStatus(t, pod, bad)
	if st.Applied || !strings.Contains(st.Message, `deny[0]: "example.com" is a domain`) || !strings.Contains(st.Message, "previous policy stays in force") {
		t.Fatalf("status %+v, want not applied, naming the field, the old policy kept", st)
	}
	if !proxy.Lookup(ip).Policy.Names("api.example.test") {
		t.Fatal("the previous policy is no longer in force")
	}

	// A change that can be applied takes effect without a restart.
	const open = `{"deny":["203.0.113.0/24"]}`
	setPolicy(t, ctx, pod, open)
	if st := waitStatus(t, pod, open); !st.Applied {
		t.Fatalf("status %+v, want applied", st)
	}
	if p := proxy.Lookup(ip).Policy; p.DeniesAll() || p.Names("api.example.test") {
		t.Fatal("the new policy is not in force")
	}

	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if proxy.Lookup(ip) != nil || fw.polices(ip) {
			return errors.New("the deleted Pod's address is still policed")
		}
		return nil
	})
}

func TestFirstPolicyThatCannotBeAppliedMeansNoEgress(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	for _, tc := range []struct {
		name, ip, policy, message string
	}{
		{"invalid", "198.18.0.22", `{"allow":["10.0.0.1"]}`, `allow[0]: "10.0.0.1" lies in 10.0.0.0/8`},
		{"missing-secret", "198.18.0.23", withCredential, `Secret "api" in namespace "` + ns + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tc.ip)
			pod := makePod(t, ctx, ns, tc.name, tc.ip, tc.policy)
			st := waitStatus(t, pod, tc.policy)
			if st.Applied || !strings.Contains(st.Message, tc.message) || !strings.Contains(st.Message, "no egress") {
				t.Fatalf("status %+v, want not applied with %q", st, tc.message)
			}
			sb := proxy.Lookup(ip)
			if sb == nil || !sb.Policy.DeniesAll() || sb.Policy.Names("api.example.test") || !fw.polices(ip) {
				t.Fatalf("the proxy holds %+v, want deny-all and the firewall policing the Pod", sb)
			}
		})
	}
	// The missing Secret appears: the policy applies without a change to the Pod.
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Data: map[string][]byte{"authorization": []byte("Bearer late")}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing-secret"}}
	framework.Eventually(t, func(context.Context) error {
		if st := waitStatus(t, pod, withCredential); !st.Applied {
			return fmt.Errorf("status %+v, want applied once the Secret exists", st)
		}
		return nil
	})
	if v := proxy.Lookup(netip.MustParseAddr("198.18.0.23")).Secrets[egress.SecretKeyRef{Name: "api", Key: "authorization"}]; v != "Bearer late" {
		t.Fatalf("the proxy holds %q, want the Secret's value", v)
	}
}

func TestPolicyRemovedIsNoLongerPoliced(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	ip := netip.MustParseAddr("198.18.0.32")
	pod := makePod(t, ctx, ns, "plain", ip.String(), `{}`)
	waitStatus(t, pod, `{}`)
	if proxy.Lookup(ip) == nil {
		t.Fatal("the Pod is not policed")
	}
	patch := []byte(`{"metadata":{"annotations":{"` + egress.PolicyAnnotation + `":null}}}`)
	if err := env.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(context.Context) error {
		if proxy.Lookup(ip) != nil || fw.polices(ip) {
			return errors.New("a Pod whose policy was removed is still policed")
		}
		return nil
	})
}

func TestCAIsMadeOnceAndShared(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	key := types.NamespacedName{Namespace: ns, Name: "paddock-egress-ca"}
	first, err := egressnode.LoadOrCreateCA(ctx, env.Client, key)
	if err != nil {
		t.Fatal(err)
	}
	second, err := egressnode.LoadOrCreateCA(ctx, env.Client, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(first.CertPEM()) != string(second.CertPEM()) {
		t.Fatal("a second node got another CA")
	}
	// Another node creates the Secret between this node's read and its create.
	raced := types.NamespacedName{Namespace: ns, Name: "raced"}
	var winner *egressproxy.CA
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	racing := interceptor.NewClient(watching, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		var err error
		if winner, err = egressnode.LoadOrCreateCA(ctx, env.Client, raced); err != nil {
			return err
		}
		return c.Create(ctx, obj, opts...)
	}})
	loser, err := egressnode.LoadOrCreateCA(ctx, racing, raced)
	if err != nil {
		t.Fatalf("the node that lost the race: %v", err)
	}
	if string(loser.CertPEM()) != string(winner.CertPEM()) {
		t.Fatal("the node that lost the race uses its own CA")
	}
	bad := types.NamespacedName{Namespace: ns, Name: "broken"}
	framework.MustCreate(t, ctx, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bad.Name},
		Data: map[string][]byte{corev1.TLSCertKey: []byte("x"), corev1.TLSPrivateKeyKey: []byte("y")}})
	if _, err := egressnode.LoadOrCreateCA(ctx, env.Client, bad); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("got %v, want an error saying how to recover", err)
	}
}

// syncLog records every rule set a reconciler asks the firewall for, in order.
type syncLog struct {
	mu    sync.Mutex
	syncs [][]netip.Addr
}

func (l *syncLog) Sync(_ context.Context, addrs []netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncs = append(l.syncs, slices.Clone(addrs))
	return nil
}

func (l *syncLog) all() [][]netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.syncs)
}

// A component that starts (or restarts after a crash) on a node that already runs policed Pods
// must never write a rule set that leaves one of them out: the chains its previous run left
// keep those Pods closed, and each write replaces the whole set, so a first write holding only
// the first Pod reconciled would open the others until their turn.
func TestRestartNeverOpensAPolicedPod(t *testing.T) {
	ns := env.Namespace(t)
	ctx := framework.Context(t, framework.DefaultTimeout)
	const node = "restarted-node"
	ips := []netip.Addr{netip.MustParseAddr("198.18.0.41"), netip.MustParseAddr("198.18.0.42"), netip.MustParseAddr("198.18.0.43")}
	for i, ip := range ips {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sb-%d", i), Namespace: ns, Annotations: map[string]string{egress.PolicyAnnotation: `{"allow":["example.test"],"deny":["0.0.0.0/0"]}`}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		}
		framework.MustCreate(t, ctx, env.Client, pod)
		if _, err := framework.MarkPodRunning(ctx, env.Client, client.ObjectKeyFromObject(pod), ip.String()); err != nil {
			t.Fatal(err)
		}
	}

	// The component starts on the node, as cmd/paddock-egress does: a cache of the node's Pods.
	ca, err := egressproxy.NewCA("restart")
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := egressproxy.New(egressproxy.Config{OriginalDst: egressnode.OriginalDst, UpstreamDNS: "127.0.0.1:53", CA: ca, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	log := &syncLog{}
	stop, err := env.StartManager(func(mgr ctrl.Manager) error {
		r := &egressnode.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Proxy: restarted, Rules: log}
		return ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Named("egress-restarted").Complete(r)
	}, func(o *manager.Options) {
		o.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	framework.Eventually(t, func(context.Context) error {
		for _, ip := range ips {
			if sb := restarted.Lookup(ip); sb == nil || !sb.Policy.Names("example.test") {
				return fmt.Errorf("%s does not have its policy in the restarted proxy yet", ip)
			}
		}
		return nil
	})
	syncs := log.all()
	if len(syncs) == 0 {
		t.Fatal("the restarted component never wrote the firewall")
	}
	for i, s := range syncs {
		for _, ip := range ips {
			if !slices.Contains(s, ip) {
				t.Errorf("firewall write %d of %d polices %v: policed Pod %s left out, so open until its turn", i+1, len(syncs), s, ip)
			}
		}
	}
}
