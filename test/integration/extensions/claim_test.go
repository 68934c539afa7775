package extensions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestWarmClaimFastPath proves a warm claim binds a ready member with one patch of the Sandbox
// and one status write of the claim (plus the user's create: three writes), and that the
// adopted Sandbox carries the claim's identity instead of the pool's.
func TestWarmClaimFastPath(t *testing.T) {
	h := controllers(t)
	ns := env.Namespace(t)
	readyPool(t, ns, "pool", 2, builder.MakeTemplate("tpl", ns).PodLabel("team", "a"), builder.MakeWarmPool("pool", ns, "tpl"))
	warm := memberUIDs(t, ns, "pool")

	create(t, builder.MakeClaim("c", ns, "pool").Label(agentsv1beta1.CreatedByLabel, "go-client").PodLabel("sandbox.users.io/owner", "me").Obj())
	claim, sb := waitClaimReady(t, ns, "c")

	if !warm[sb.UID] {
		t.Fatalf("claim bound %s, which was not a warm member", sb.Name)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{blueprint.ControllerRef("SandboxClaim", claim)}, sb.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	for k, want := range map[string]string{
		agentsv1beta1.ClaimUIDLabel:        string(claim.UID),
		agentsv1beta1.LaunchTypeLabel:      agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.CreatedByLabel:       "go-client",
		agentsv1beta1.WarmPoolSandboxLabel: "",
	} {
		if got := sb.Labels[k]; got != want {
			t.Errorf("Sandbox label %s = %q, want %q", k, got, want)
		}
	}
	wantPodLabels := map[string]string{
		"team": "a", "sandbox.users.io/owner": "me", agentsv1beta1.ClaimUIDLabel: string(claim.UID),
		agentsv1beta1.SandboxTemplateRefHashLabel: blueprint.TemplateRefHash("tpl"), agentsv1beta1.CreatedByLabel: "go-client",
	}
	if diff := cmp.Diff(wantPodLabels, sb.Spec.PodTemplate.ObjectMeta.Labels); diff != "" {
		t.Errorf("pod-template labels (-want +got):\n%s", diff)
	}
	if _, ok := sb.Spec.PodTemplate.ObjectMeta.Annotations[agentsv1beta1.SafeToEvictAnnotation]; ok {
		t.Errorf("adopted Sandbox keeps the pool's safe-to-evict annotation")
	}
	if diff := cmp.Diff(extensionsv1beta1.SandboxClaimSandboxStatus{Name: sb.Name, PodIPs: sb.Status.PodIPs}, claim.Status.Sandbox); diff != "" {
		t.Errorf("claim status.sandbox (-want +got):\n%s", diff)
	}

	writes := h.writesOf("claim").InNamespace(ns)
	var toSandbox, toClaim, other []write
	for _, w := range writes {
		switch {
		case w.Kind == "Sandbox" && w.Name == sb.Name:
			toSandbox = append(toSandbox, w)
		case w.Kind == "SandboxClaim" && w.Name == "c":
			toClaim = append(toClaim, w)
		default:
			other = append(other, w)
		}
	}
	if len(toSandbox) != 1 || toSandbox[0].Verb != "patch" || toSandbox[0].Subresource != "" {
		t.Errorf("claim controller wrote the Sandbox %d times, want one patch: %v", len(toSandbox), toSandbox)
	}
	if len(toClaim) != 1 || toClaim[0].Subresource != "status" {
		t.Errorf("claim controller wrote the claim %d times, want one status write: %v", len(toClaim), toClaim)
	}
	if len(other) != 0 {
		t.Errorf("claim controller wrote other objects: %v", other)
	}
	// The pool refills behind the claim.
	waitPoolReady(t, ns, "pool", 2)

	// After the status write: the adoption event and the metrics.
	framework.Eventually(t, func(ctx context.Context) error {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == sandboxclaim.ReasonSandboxAdopted && e.InvolvedObject.Name == "c" {
				return nil
			}
		}
		return fmt.Errorf("no %s event for claim c", sandboxclaim.ReasonSandboxAdopted)
	})
	if n := metricCount(t, "agent_sandbox_claim_creation_total", map[string]string{"namespace": ns, "launch_type": "warm", "warmpool_name": "pool", "pod_condition": "ready", "created_by": "go-client", "sandbox_template": "tpl"}); n != 1 {
		t.Errorf("agent_sandbox_claim_creation_total{launch_type=warm} = %v, want 1", n)
	}
	if n := metricCount(t, "agent_sandbox_creation_latency_seconds", map[string]string{"namespace": ns, "launch_type": "warm", "sandbox_template": "tpl"}); n != 1 {
		t.Errorf("agent_sandbox_creation_latency_seconds observations = %v, want 1", n)
	}
}

// metricCount returns a counter's value or a histogram's sample count for the series with
// exactly these labels, 0 when there is none.
func metricCount(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if m.GetHistogram() != nil {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestColdClaim proves a claim on an empty pool gets a Sandbox named after it, with the
// template's blueprint, secure defaults, injected env and volume claim templates.
func TestColdClaim(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).
		EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyAllowed).
		VolumeClaimTemplatesPolicy(extensionsv1beta1.VolumeClaimTemplatesPolicyAllowed).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())
	create(t, builder.MakeClaim("c", ns, "pool").Env("GREETING", "hi").VolumeClaim("data", "1Gi").Obj())

	claim, sb := waitClaimReady(t, ns, "c")
	if sb.Name != "c" || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold {
		t.Errorf("got Sandbox %s launch-type %q, want c, cold", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel])
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != claim.UID {
		t.Errorf("Sandbox controller = %v, want the claim", ref)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "GREETING", Value: "hi"}}, sb.Spec.PodTemplate.Spec.Containers[0].Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(sb.Spec.VolumeClaimTemplates) != 1 || sb.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("volume claim templates = %v, want data", sb.Spec.VolumeClaimTemplates)
	}
	if sb.Spec.PodTemplate.Spec.DNSPolicy != corev1.DNSNone || sb.Spec.PodTemplate.Spec.AutomountServiceAccountToken == nil {
		t.Errorf("cold Sandbox lacks secure defaults: %+v", sb.Spec.PodTemplate.Spec)
	}
	if got := sb.Labels[agentsv1beta1.ClaimUIDLabel]; got != string(claim.UID) {
		t.Errorf("claim-uid label = %q, want %q", got, claim.UID)
	}
}

// TestClaimRunTimeRejections proves the reasons for what admission cannot see.
func TestClaimRunTimeRejections(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj()) // env and volume claim templates Disallowed
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())

	tests := []struct {
		claim  *builder.ClaimWrapper
		reason string
	}{
		{builder.MakeClaim("env", ns, "pool").Env("A", "b"), extensionsv1beta1.ClaimReasonEnvVarsInjectionRejected},
		{builder.MakeClaim("vct", ns, "pool").VolumeClaim("data", "1Gi"), extensionsv1beta1.ClaimReasonVolumeClaimTemplatesError},
		{builder.MakeClaim("domain", ns, "pool").PodLabel("example.com/x", "y"), extensionsv1beta1.ClaimReasonInvalidMetadata},
		{builder.MakeClaim("nopool", ns, "missing"), extensionsv1beta1.ClaimReasonWarmPoolNotFound},
	}
	for _, tt := range tests {
		c := tt.claim.Obj()
		t.Run(c.Name, func(t *testing.T) {
			create(t, c)
			claim := waitClaimReason(t, ns, c.Name, "False", tt.reason)
			if claim.Status.Sandbox.Name != "" {
				t.Errorf("rejected claim names Sandbox %q", claim.Status.Sandbox.Name)
			}
			if _, err := get(context.Background(), ns, c.Name, &agentsv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Sandbox exists for the rejected claim (err %v)", err)
			}
		})
	}

	// The missing pool appears: the waiting claim binds.
	create(t, builder.MakeTemplate("tpl2", ns).Obj())
	create(t, builder.MakeWarmPool("missing", ns, "tpl2").Replicas(0).Obj())
	waitClaimReady(t, ns, "nopool")
}

// TestClaimAdmissionRejectsBadMetadata proves additionalPodMetadata under reserved prefixes and
// invalid label values never get stored, with messages naming the field.
func TestClaimAdmissionRejectsBadMetadata(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name      string
		claim     *builder.ClaimWrapper
		wantInMsg string
	}{
		{"reserved label", builder.MakeClaim("a", ns, "pool").PodLabel(agentsv1beta1.ClaimUIDLabel, "x"), "additionalPodMetadata.labels"},
		{"reserved extensions label", builder.MakeClaim("b", ns, "pool").PodLabel("extensions.agents.x-k8s.io/x", "y"), "additionalPodMetadata.labels"},
		{"reserved annotation", builder.MakeClaim("c", ns, "pool").PodAnnotation(agentsv1beta1.PodNameAnnotation, "x"), "additionalPodMetadata.annotations"},
		{"trace annotation", builder.MakeClaim("d", ns, "pool").PodAnnotation(agentsv1beta1.TraceContextAnnotation, "{}"), "additionalPodMetadata.annotations"},
		{"invalid label value", builder.MakeClaim("e", ns, "pool").PodLabel("sandbox.users.io/x", "not a label value!"), "additionalPodMetadata.labels"},
		{"label value too long", builder.MakeClaim("f", ns, "pool").PodLabel("sandbox.users.io/x", strings.Repeat("a", 64)), "additionalPodMetadata.labels"},
		{"invalid label key", builder.MakeClaim("g", ns, "pool").PodLabel("bad key", "x"), "additionalPodMetadata.labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.claim.Obj()
			err := env.Client.Create(context.Background(), c)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("error %q does not name %s", err, tt.wantInMsg)
			}
			if _, err := get(context.Background(), ns, c.Name, &extensionsv1beta1.SandboxClaim{}); !apierrors.IsNotFound(err) {
				t.Errorf("rejected claim was stored (get: %v)", err)
			}
		})
	}
}

// TestClaimExpiry proves the three shutdown policies.
func TestClaimExpiry(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())

	// Retain: the Sandbox goes, the claim stays with ClaimExpired.
	create(t, builder.MakeClaim("retain", ns, "pool").Obj())
	_, sb := waitClaimReady(t, ns, "retain")
	setShutdown(t, ns, "retain", time.Now().Add(-time.Second), extensionsv1beta1.ShutdownPolicyRetain)
	waitClaimReason(t, ns, "retain", "False", extensionsv1beta1.ClaimReasonExpired)
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := get(ctx, ns, sb.Name, &agentsv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Sandbox of the expired claim still exists (err %v)", err)
		}
		claim, err := get(ctx, ns, "retain", &extensionsv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if claim.Status.Sandbox.Name != "" {
			return fmt.Errorf("expired claim still names Sandbox %q", claim.Status.Sandbox.Name)
		}
		return nil
	})

	// Delete: the claim goes.
	create(t, builder.MakeClaim("delete", ns, "pool").Obj())
	waitClaimReady(t, ns, "delete")
	setShutdown(t, ns, "delete", time.Now().Add(-time.Second), extensionsv1beta1.ShutdownPolicyDelete)
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := get(ctx, ns, "delete", &extensionsv1beta1.SandboxClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim still exists (err %v)", err)
		}
		return nil
	})

	// DeleteForeground: the claim is deleted with foreground propagation. envtest runs no
	// garbage collector, so the claim stays, marked for foreground deletion.
	create(t, builder.MakeClaim("fg", ns, "pool").Obj())
	waitClaimReady(t, ns, "fg")
	setShutdown(t, ns, "fg", time.Now().Add(-time.Second), extensionsv1beta1.ShutdownPolicyDeleteForeground)
	framework.Eventually(t, func(ctx context.Context) error {
		c, err := get(ctx, ns, "fg", &extensionsv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if c.DeletionTimestamp.IsZero() || !slicesContains(c.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("claim not deleted in the foreground: deletionTimestamp %v finalizers %v", c.DeletionTimestamp, c.Finalizers)
		}
		return nil
	})
}

func setShutdown(t *testing.T, ns, name string, at time.Time, policy extensionsv1beta1.ShutdownPolicy) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		c, err := get(ctx, ns, name, &extensionsv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		c.Spec.Lifecycle = &extensionsv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: at}, ShutdownPolicy: policy}
		return env.Client.Update(ctx, c)
	})
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestClaimMirrorsFinishedAndExpiresAfterTTL proves Ready and Finished are mirrored from the
// Sandbox, and ttlSecondsAfterFinished expires the claim once its Sandbox finished.
func TestClaimMirrorsFinishedAndExpiresAfterTTL(t *testing.T) {
	h := controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())
	create(t, builder.MakeClaim("c", ns, "pool").Lifecycle(extensionsv1beta1.Lifecycle{TTLSecondsAfterFinished: ptrTo[int32](0)}).Obj())
	_, sb := waitClaimReady(t, ns, "c")

	// The Pod completes: the stand-in leaves the Sandbox alone and the test writes what the
	// Sandbox controller would.
	h.readiness.SetDecision(func(s *agentsv1beta1.Sandbox) framework.Readiness {
		if s.Name == sb.Name {
			return framework.Pending
		}
		return framework.Ready
	})
	framework.Eventually(t, func(ctx context.Context) error {
		cur, err := get(ctx, ns, sb.Name, &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		orig := cur.DeepCopy()
		now := metav1.Now()
		cur.Status.Conditions = []metav1.Condition{
			{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.SandboxReasonPodSucceeded, Message: "Pod completed successfully", LastTransitionTime: now},
			{Type: agentsv1beta1.SandboxConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.SandboxReasonPodSucceeded, Message: "Pod completed successfully", LastTransitionTime: now},
		}
		return env.Client.Status().Patch(ctx, cur, client.MergeFrom(orig))
	})
	// With a TTL of 0 the claim expires as soon as Finished is mirrored; Retain deletes the
	// Sandbox and keeps the claim, with Finished preserved for the record.
	claim := waitClaimReason(t, ns, "c", "False", extensionsv1beta1.ClaimReasonExpired)
	if err := builder.HasCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionFinished, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodSucceeded); err != nil {
		t.Errorf("Finished not mirrored: %v", err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := get(ctx, ns, sb.Name, &agentsv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Sandbox of the expired claim still exists (err %v)", err)
		}
		return nil
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestBoundSandboxFollowsMetadataEdits proves template and claim metadata edits reach a bound
// Sandbox's pod template, while spec edits do not.
func TestBoundSandboxFollowsMetadataEdits(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())
	create(t, builder.MakeClaim("c", ns, "pool").Obj())
	_, sb := waitClaimReady(t, ns, "c")

	updateTemplate(t, ns, "tpl", func(tpl *extensionsv1beta1.SandboxTemplate) {
		tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"note": "v2"}
		tpl.Spec.PodTemplate.Spec.Containers[0].Image = "registry.invalid/paddock/test:v2"
	})
	framework.Eventually(t, func(ctx context.Context) error {
		// Any claim update wakes the claim; the label proves the claim's edit arrives too.
		c, err := get(ctx, ns, "c", &extensionsv1beta1.SandboxClaim{})
		if err != nil {
			return err
		}
		if c.Spec.AdditionalPodMetadata.Labels["sandbox.users.io/x"] != "y" {
			c.Spec.AdditionalPodMetadata.Labels = map[string]extensionsv1beta1.LabelValue{"sandbox.users.io/x": "y"}
			if err := env.Client.Update(ctx, c); err != nil {
				return err
			}
		}
		cur, err := get(ctx, ns, sb.Name, &agentsv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		md := cur.Spec.PodTemplate.ObjectMeta
		if md.Annotations["note"] != "v2" || md.Labels["sandbox.users.io/x"] != "y" {
			return fmt.Errorf("bound Sandbox pod metadata %+v lacks the edits", md)
		}
		if img := cur.Spec.PodTemplate.Spec.Containers[0].Image; img != builder.DefaultImage {
			return fmt.Errorf("bound Sandbox image changed to %q", img)
		}
		return nil
	})
}

// TestClaimRefusesForeignSandboxOfItsName proves a claim never takes over a Sandbox named
// after it that it does not control, and says so.
func TestClaimRefusesForeignSandboxOfItsName(t *testing.T) {
	controllers(t)
	ns := env.Namespace(t)
	create(t, builder.MakeTemplate("tpl", ns).Obj())
	create(t, builder.MakeWarmPool("pool", ns, "tpl").Replicas(0).Obj())
	create(t, builder.MakeSandbox("c", ns).Obj())
	create(t, builder.MakeClaim("c", ns, "pool").Obj())
	claim := waitClaimReason(t, ns, "c", "False", extensionsv1beta1.ClaimReasonReconcilerError)
	if msg := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady).Message; !strings.Contains(msg, `sandbox "c" is not controlled by claim "c"`) {
		t.Errorf("message %q does not explain the conflict", msg)
	}
	sb, err := get(context.Background(), ns, "c", &agentsv1beta1.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.OwnerReferences) != 0 || sb.Labels[agentsv1beta1.ClaimUIDLabel] != "" {
		t.Errorf("the claim touched the foreign Sandbox: owners %v labels %v", sb.OwnerReferences, sb.Labels)
	}
}
