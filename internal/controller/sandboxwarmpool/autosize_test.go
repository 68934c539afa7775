package sandboxwarmpool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

func TestSetAutosizeCondition(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{}
	autosizing := func() *metav1.Condition {
		return meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionAutosizing)
	}
	setAutosizeCondition(pool, sizing{on: true, policy: autosize.Policy{Min: 2, Max: 8, Headroom: 1}})
	if c := autosizing(); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "between 2 and 8") {
		t.Fatalf("autosize on: %+v, want True between 2 and 8", c)
	}
	_, _, bad := autosize.FromAnnotations(map[string]string{extensionsv1beta1.AutosizeAnnotation: "yes"})
	setAutosizeCondition(pool, sizing{on: true, invalid: bad})
	if c := autosizing(); c.Status != metav1.ConditionFalse || c.Reason != extensionsv1beta1.PoolReasonAutosizeInvalid ||
		!strings.Contains(c.Message, extensionsv1beta1.AutosizeAnnotation) {
		t.Fatalf("bad annotation: %+v, want False/%s naming %s", c, extensionsv1beta1.PoolReasonAutosizeInvalid, extensionsv1beta1.AutosizeAnnotation)
	}
	setAutosizeCondition(pool, sizing{on: true, writeErr: errors.New("refused")})
	if c := autosizing(); c.Status != metav1.ConditionFalse || c.Reason != extensionsv1beta1.PoolReasonScaleWriteFailed {
		t.Fatalf("failed write: %+v, want False/%s", c, extensionsv1beta1.PoolReasonScaleWriteFailed)
	}
	setAutosizeCondition(pool, sizing{})
	if c := autosizing(); c != nil {
		t.Fatalf("autosize off: %+v, want no condition", c)
	}
}

// TestObserveDemand: the member watch's updates give autosize its start-up times: a member
// turning Ready, in the pool or after it was claimed, or a cold Sandbox of a recorded claim.
// Claims themselves are counted from the claim watch (test/integration/autosize), not from the
// members they take, so that a claim served cold counts too and none counts twice.
func TestObserveDemand(t *testing.T) {
	r, err := New(fake.NewClientBuilder().Build(), nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	created := r.opts.Clock.Now().Add(-time.Minute)
	member := func(name string, ready bool) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash("pool")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: extensionsv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool", Name: "pool", UID: "pool-uid", Controller: ptr.To(true)}}}}
		if ready {
			meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
		}
		return sb
	}
	claimed := func(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
		sb = sb.DeepCopy()
		delete(sb.Labels, agentsv1beta1.WarmPoolSandboxLabel)
		sb.Labels[agentsv1beta1.ClaimUIDLabel] = "claim-uid"
		sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extensionsv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: "c", UID: "claim-uid", Controller: ptr.To(true)}}
		return sb
	}
	policy := autosize.Policy{Min: 1, Max: 50, Headroom: 0}
	if d := r.demand.Decide("ns/pool", policy, 1, r.opts.Clock.Now()); !d.NoData {
		t.Fatalf("before any update: %+v, want no data", d)
	}
	// A member claimed before it was Ready, then Ready: its start-up time; the claim is the
	// claim watch's to count.
	r.observeDemand(member("a", false), claimed(member("a", false)))
	r.observeDemand(claimed(member("a", false)), claimed(member("a", true)))
	d := r.demand.Decide("ns/pool", policy, 1, r.opts.Clock.Now())
	if d.NoData || d.Claims != 0 || d.ReadyTime < time.Minute {
		t.Fatalf("after a claim of a starting member that turned Ready: %d claims, start-up %s (no data %v); want no claim and about a minute", d.Claims, d.ReadyTime, d.NoData)
	}
	// A cold Sandbox of a claim the pool recorded, turning Ready: that claim's start-up time.
	now := r.opts.Clock.Now()
	r.demand.Claim("ns/pool", "cold-claim", now, now)
	cold := func(ready bool) *agentsv1beta1.Sandbox {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "cold-claim", Namespace: "ns", UID: "uid-cold",
			CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Minute)),
			Labels:            map[string]string{agentsv1beta1.LaunchTypeLabel: agentsv1beta1.LaunchTypeCold, agentsv1beta1.ClaimUIDLabel: "cold-claim"}}}
		if ready {
			meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
		}
		return sb
	}
	r.observeDemand(cold(false), cold(true))
	if d := r.demand.Decide("ns/pool", policy, 1, now); d.Claims != 1 || d.ReadyTime < 3*time.Minute {
		t.Fatalf("after the cold Sandbox of a recorded claim turned Ready: %d claims, start-up %s; want 1 claim and its 3 minutes", d.Claims, d.ReadyTime)
	}
	// Updates that neither claim nor ready a member count for nothing.
	r.observeDemand(member("b", true), member("b", true))
	relabelled := member("c", true)
	delete(relabelled.Labels, agentsv1beta1.WarmPoolSandboxLabel)
	r.observeDemand(member("c", true), relabelled)
	if d := r.demand.Decide("ns/pool", policy, 1, r.opts.Clock.Now()); d.Claims != 1 {
		t.Errorf("after updates that claim nothing: %d claims, want the 1 recorded", d.Claims)
	}
}

// TestScaleWriteRefusedNamesTheRole uses the fake client only to inject a refusal a real API
// server gives only to a controller without the scale permission.
func TestScaleWriteRefusedNamesTheRole(t *testing.T) {
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns",
		Annotations: map[string]string{extensionsv1beta1.AutosizeAnnotation: "true", extensionsv1beta1.AutosizeMinAnnotation: "3"}},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1)}}
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: extensionsv1beta1.GroupVersion.Group, Resource: "sandboxwarmpools/scale"}, "pool", errors.New("no"))
		},
	})
	r, err := New(c, nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.autosize(context.Background(), pool, r.opts.Clock.Now())
	if s.writeErr == nil || !strings.Contains(s.writeErr.Error(), "needs patch on sandboxwarmpools/scale") {
		t.Fatalf("write error = %v, want one naming the missing permission", s.writeErr)
	}
	if *pool.Spec.Replicas != 1 {
		t.Errorf("spec.replicas = %d after a refused write, want 1 as it was", *pool.Spec.Replicas)
	}
}
