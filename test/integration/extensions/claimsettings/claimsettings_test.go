package claimsettings

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

const testTimeout = 3 * time.Minute

// warmPool makes a template whose runtime is sandboxd (unless plain) and a pool of one ready
// member, starts a sandboxd for the member configured as the controllers configure it (its
// tokens derived from daemonKey, locked when the template says sandboxd), and returns both.
func warmPool(t *testing.T, ctx context.Context, ns string, plain bool, daemonKey []byte) (*agentsv1beta1.Sandbox, *daemon) {
	t.Helper()
	tpl := builder.MakeTemplate("tpl", ns).EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyAllowed)
	if !plain {
		tpl.Sandboxd()
	}
	for _, obj := range []client.Object{tpl.Obj(), builder.MakeWarmPool("pool", ns, "tpl").Replicas(1).Obj()} {
		framework.MustCreate(t, ctx, env.Client, obj)
	}
	var member agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash("pool")}); err != nil {
			return err
		}
		if len(list.Items) != 1 || !meta.IsStatusConditionTrue(list.Items[0].Status.Conditions, agentsv1beta1.SandboxConditionReady) || len(list.Items[0].Status.PodIPs) == 0 {
			return fmt.Errorf("want one ready pool member with a pod IP, have %d", len(list.Items))
		}
		member = list.Items[0]
		return nil
	})
	locked := blueprint.LockedUntilClaimed(&member.Spec.PodTemplate.Spec)
	if locked == plain {
		t.Fatalf("member %s locked = %v for a template with runtime annotation %v", member.Name, locked, !plain)
	}
	d := startDaemon(t, &member, daemonKey, locked)
	daemons.add(member.Status.PodIPs[0], d)
	return &member, d
}

// waitClaim waits until the claim is Ready and returns it with its Sandbox.
func waitClaim(t *testing.T, ns, name string) (*extensionsv1beta1.SandboxClaim, *agentsv1beta1.Sandbox) {
	t.Helper()
	c, sb := &extensionsv1beta1.SandboxClaim{}, &agentsv1beta1.Sandbox{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionTrue, ""); err != nil {
			return fmt.Errorf("%w (conditions %s)", err, builder.FormatConditions(c.Status.Conditions))
		}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Status.Sandbox.Name}, sb)
	})
	return c, sb
}

// A claim with env takes the warm member; sandboxd has the env before the claim is Ready, every
// process started afterwards sees it, and the claim costs the controller no extra API write.
func TestClaimWithEnvIsServedWarm(t *testing.T) {
	ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
	member, d := warmPool(t, ctx, ns, false, testKey)
	var readyAtPut atomic.Bool
	var puts atomic.Int32
	d.onPut = func() {
		if puts.Add(1) > 1 {
			return // only the first delivery must precede Ready
		}
		c := &extensionsv1beta1.SandboxClaim{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "run"}, c); err == nil &&
			meta.IsStatusConditionTrue(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady) {
			readyAtPut.Store(true)
		}
	}
	writesBefore := len(claimWrites.inNamespace(ns))

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Env("TASK_ID", "42").Env("MODEL", "large").Obj())
	c, sb := waitClaim(t, ns, "run")

	if sb.Name != member.Name || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeWarm {
		t.Fatalf("claim bound to %s (launch type %q), want the warm member %s", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel], member.Name)
	}
	if readyAtPut.Load() {
		t.Errorf("the claim was Ready before its settings reached sandboxd")
	}
	if n := d.putCount(); n != 1 {
		t.Errorf("sandboxd got %d claim-settings requests, want 1", n)
	}
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered); err != nil {
		t.Error(err)
	}
	status, got := d.settings(t)
	want := map[string]any{"claimName": "run", "claimUID": string(c.UID), "env": []any{"MODEL", "TASK_ID"}, "files": []any{}}
	if diff := cmp.Diff(want, got); status != 200 || diff != "" {
		t.Errorf("sandboxd claim settings: %d (-want +got):\n%s", status, diff)
	}
	if out := d.execute(t, "printenv TASK_ID MODEL"); out != "42\nlarge" {
		t.Errorf("a process started after Ready sees %q, want the claim's env", out)
	}
	writes := claimWrites.inNamespace(ns)[writesBefore:]
	wantWrites := []string{"patch Sandbox " + ns + "/" + member.Name, "patch SandboxClaim " + ns + "/run/status"}
	if diff := cmp.Diff(wantWrites, writes); diff != "" {
		t.Errorf("claim controller writes (-want +got):\n%s", diff)
	}
}

// sandboxd that refuses the settings makes the claim discard the warm member and start cold
// (with the env in its Pod spec) and say why: a control token that does not match is
// ClaimSettingsFailed; a member that somebody else bound before the controller (here with the
// control token, as code that had reached it would) is WarmMemberTampered, with or without env.
func TestRefusedSettingsFallBackToCold(t *testing.T) {
	otherKey := bytes.Repeat([]byte{7}, credentials.KeySize)
	// Someone holding the control token binds the member to another claim first.
	bindElsewhere := func(t *testing.T, d *daemon) {
		framework.BindSandboxd(t, "http://"+d.rest, d.control, claim.Settings{ClaimName: "other", ClaimUID: "some-other-uid"})
	}
	for _, tt := range []struct {
		name    string
		key     []byte
		prepare func(t *testing.T, d *daemon)
		env     bool
		reason  string
	}{
		{name: "wrong control token", key: otherKey, env: true, reason: extensionsv1beta1.ClaimReasonSettingsFailed},
		{name: "member bound elsewhere, claim with env", key: testKey, prepare: bindElsewhere, env: true, reason: extensionsv1beta1.ClaimReasonWarmMemberTampered},
		{name: "member bound elsewhere, claim without env", key: testKey, prepare: bindElsewhere, reason: extensionsv1beta1.ClaimReasonWarmMemberTampered},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
			member, d := warmPool(t, ctx, ns, false, tt.key)
			if tt.prepare != nil {
				tt.prepare(t, d)
			}
			putsBefore := d.putCount()
			claim := builder.MakeClaim("run", ns, "pool")
			if tt.env {
				claim.Env("TASK_ID", "42")
			}
			framework.MustCreate(t, ctx, env.Client, claim.Obj())
			c, sb := waitClaim(t, ns, "run")

			if sb.Name != "run" || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold {
				t.Fatalf("claim bound to %s (launch type %q), want a cold Sandbox named after it", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel])
			}
			wantEnv := corev1.EnvVar{Name: "TASK_ID", Value: "42"}
			if tt.env && !slices.Contains(sb.Spec.PodTemplate.Spec.Containers[0].Env, wantEnv) {
				t.Errorf("cold Sandbox env = %v, want it to contain %v", sb.Spec.PodTemplate.Spec.Containers[0].Env, wantEnv)
			}
			if blueprint.LockedUntilClaimed(&sb.Spec.PodTemplate.Spec) {
				t.Errorf("the cold Sandbox starts locked: nobody would unlock it")
			}
			if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionFalse, tt.reason); err != nil {
				t.Error(err)
			}
			gone := &agentsv1beta1.Sandbox{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(member), gone); !apierrors.IsNotFound(err) && gone.UID == member.UID {
				t.Errorf("discarded warm member %s still exists (err %v)", member.Name, err)
			}
			if n := d.putCount() - putsBefore; n != 1 {
				t.Errorf("sandboxd got %d claim-settings requests, want 1: a refusal is not retried", n)
			}
			waitEvent(t, ns, "run", tt.reason)
		})
	}
}

// A delivery that fails for a reason a retry can fix is retried, and the claim stays warm.
func TestTransientFailureIsRetried(t *testing.T) {
	ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
	member, d := warmPool(t, ctx, ns, false, testKey)
	daemons.mu.Lock()
	d.failResolutions = 2
	daemons.mu.Unlock()

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Env("TASK_ID", "42").Obj())
	c, sb := waitClaim(t, ns, "run")
	if sb.Name != member.Name {
		t.Fatalf("claim bound to %s, want the warm member %s", sb.Name, member.Name)
	}
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered); err != nil {
		t.Error(err)
	}
	daemons.mu.Lock()
	resolutions := d.resolutions
	daemons.mu.Unlock()
	if resolutions != 3 || d.putCount() != 1 {
		t.Errorf("%d address lookups and %d PUTs, want 2 failed lookups, then 1 PUT", resolutions, d.putCount())
	}
}

// A sandboxd that stays unreachable for GiveUpAfter is given up: the claim starts cold. Until
// then the claim says why it is not Ready.
func TestUnreachableSandboxdIsGivenUp(t *testing.T) {
	ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
	member, d := warmPool(t, ctx, ns, false, testKey)
	daemons.mu.Lock()
	d.failResolutions = 1 << 30
	daemons.mu.Unlock()

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Env("TASK_ID", "42").Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		c := &extensionsv1beta1.SandboxClaim{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "run"}, c); err != nil {
			return err
		}
		return errors.Join(
			builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonSettingsPending),
			builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonSettingsPending))
	})
	clockOffset.Add(int64(giveUpAfter))

	c, sb := waitClaim(t, ns, "run")
	if sb.Name != "run" || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold {
		t.Fatalf("claim bound to %s (launch type %q), want a cold Sandbox named after it", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel])
	}
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionFalse, extensionsv1beta1.ClaimReasonSettingsFailed); err != nil {
		t.Error(err)
	}
	if d.putCount() != 0 || member.Name == sb.Name {
		t.Errorf("%d PUTs reached the unreachable sandboxd", d.putCount())
	}
}

// A PUT that sandboxd applied but whose answer was lost is not a failure to give up on: sandboxd
// is bound and unlocked, and may already serve the claim's holder (the E2B front door answers
// create once it does), so when the retries run out the controller asks sandboxd, finds it bound
// to the claim, and keeps the warm member instead of deleting it under its holder.
func TestAppliedSettingsWithALostAnswerKeepTheMember(t *testing.T) {
	ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
	member, d := warmPool(t, ctx, ns, false, testKey)
	d.mu.Lock()
	d.loseAnswers = true
	d.mu.Unlock()

	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Obj())
	framework.Eventually(t, func(context.Context) error {
		if d.putCount() == 0 {
			return errors.New("no claim-settings PUT reached sandboxd yet")
		}
		return nil
	})
	// The holder's token works already: this is when the front door would answer create.
	if got := d.execute(t, "echo served"); !strings.Contains(got, "served") {
		t.Fatalf("sandboxd bound by the PUT did not serve the sandbox token: %q", got)
	}
	clockOffset.Add(int64(giveUpAfter))

	c, sb := waitClaim(t, ns, "run")
	if sb.Name != member.Name {
		t.Fatalf("claim bound to %s (launch type %q); want the warm member %s kept", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel], member.Name)
	}
	if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered); err != nil {
		t.Error(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(member), &agentsv1beta1.Sandbox{}); err != nil {
		t.Errorf("the warm member: %v; want it kept", err)
	}
}

// Without the runtime annotation a claim with env starts cold, as upstream, and nothing calls
// sandboxd. On a sandboxd template a claim without env finds the member locked (its holder's
// token is refused), binds it with exactly one PUT and no extra API write, and only then is Ready,
// with the member unlocked for the sandbox token.
func TestEveryWarmClaimOfASandboxdTemplateBindsTheMember(t *testing.T) {
	t.Run("template without the runtime annotation", func(t *testing.T) {
		ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
		_, d := warmPool(t, ctx, ns, true, testKey)
		framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Env("TASK_ID", "42").Obj())
		c, sb := waitClaim(t, ns, "run")
		if sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeCold || d.putCount() != 0 {
			t.Errorf("claim bound to %s (launch type %q) after %d PUTs, want a cold Sandbox and none", sb.Name, sb.Labels[agentsv1beta1.LaunchTypeLabel], d.putCount())
		}
		if meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered) != nil {
			t.Errorf("claim has a SettingsDelivered condition without claim settings")
		}
	})
	t.Run("claim without env", func(t *testing.T) {
		ctx, ns := framework.Context(t, testTimeout), env.Namespace(t)
		member, d := warmPool(t, ctx, ns, false, testKey)
		if status, body := d.tryExecute(t, "true"); status != http.StatusForbidden {
			t.Fatalf("an unclaimed member answered the sandbox token with %d %s, want 403", status, body)
		}
		writesBefore := len(claimWrites.inNamespace(ns))
		framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("run", ns, "pool").Obj())
		c, sb := waitClaim(t, ns, "run")
		if sb.Name != member.Name || d.putCount() != 1 {
			t.Fatalf("claim bound to %s after %d PUTs, want the warm member %s and one", sb.Name, d.putCount(), member.Name)
		}
		if err := builder.HasCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered, metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered); err != nil {
			t.Error(err)
		}
		if status, got := d.settings(t); status != http.StatusOK || got["claimUID"] != string(c.UID) {
			t.Errorf("sandboxd claim settings: %d %v, want bound to claim %s", status, got, c.UID)
		}
		if out := d.execute(t, "echo unlocked"); out != "unlocked" {
			t.Errorf("the claimed member runs %q", out)
		}
		writes := claimWrites.inNamespace(ns)[writesBefore:]
		wantWrites := []string{"patch Sandbox " + ns + "/" + member.Name, "patch SandboxClaim " + ns + "/run/status"}
		if diff := cmp.Diff(wantWrites, writes); diff != "" {
			t.Errorf("claim controller writes (-want +got):\n%s", diff)
		}
		t.Logf("claim-settings PUT on loopback took %s inside sandboxd", d.lastPutTime())
	})
}

// waitEvent waits for an event with reason about the named claim.
func waitEvent(t *testing.T, ns, claim, reason string) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Name == claim {
				return nil
			}
		}
		return fmt.Errorf("no %s event about claim %s yet", reason, claim)
	})
}
