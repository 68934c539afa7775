package sandboxclaim

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

func settingsTemplate(annotation string, policy extensionsv1beta1.EnvVarsInjectionPolicy, env ...corev1.EnvVar) *extensionsv1beta1.SandboxTemplate {
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"}}
	if annotation != "" {
		tpl.Annotations = map[string]string{extensionsv1beta1.RuntimeAnnotation: annotation}
	}
	tpl.Spec.EnvVarsInjectionPolicy = policy
	tpl.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "sandboxd", Env: env}, {Name: "sidecar"}}
	return tpl
}

func claimWithEnv(env ...extensionsv1beta1.EnvVar) *extensionsv1beta1.SandboxClaim {
	return &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"},
		Spec: extensionsv1beta1.SandboxClaimSpec{Env: env}}
}

func TestWarmSettings(t *testing.T) {
	allowed, overrides := extensionsv1beta1.EnvVarsInjectionPolicyAllowed, extensionsv1beta1.EnvVarsInjectionPolicyOverrides
	task := extensionsv1beta1.EnvVar{Name: "TASK", Value: "42"}
	tests := []struct {
		name  string
		claim *extensionsv1beta1.SandboxClaim
		tpl   *extensionsv1beta1.SandboxTemplate
		want  claim.Settings
		warm  bool
	}{
		{name: "no env", claim: claimWithEnv(), tpl: settingsTemplate("sandboxd", allowed)},
		{name: "runtime not annotated", claim: claimWithEnv(task), tpl: settingsTemplate("", allowed)},
		{name: "unknown runtime", claim: claimWithEnv(task), tpl: settingsTemplate("other", allowed)},
		{name: "policy Disallowed", claim: claimWithEnv(task), tpl: settingsTemplate("sandboxd", extensionsv1beta1.EnvVarsInjectionPolicyDisallowed)},
		{
			name:  "Allowed refuses to override the template's variable",
			claim: claimWithEnv(task), tpl: settingsTemplate("sandboxd", allowed, corev1.EnvVar{Name: "TASK", Value: "0"}),
		},
		{
			name:  "entry for another container",
			claim: claimWithEnv(extensionsv1beta1.EnvVar{Name: "X", Value: "1", ContainerName: "sidecar"}), tpl: settingsTemplate("sandboxd", allowed),
		},
		{
			name:  "entry for a container that does not exist",
			claim: claimWithEnv(extensionsv1beta1.EnvVar{Name: "X", Value: "1", ContainerName: "nope"}), tpl: settingsTemplate("sandboxd", allowed),
		},
		{
			name:  "Allowed, entries for the sandboxd container by default and by name",
			claim: claimWithEnv(task, extensionsv1beta1.EnvVar{Name: "MODEL", Value: "large", ContainerName: "sandboxd"}),
			tpl:   settingsTemplate("sandboxd", allowed),
			want:  claim.Settings{ClaimName: "c", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "TASK", Value: "42"}, {Name: "MODEL", Value: "large"}}},
			warm:  true,
		},
		{
			name:  "Overrides may replace the template's variable",
			claim: claimWithEnv(task), tpl: settingsTemplate("sandboxd", overrides, corev1.EnvVar{Name: "TASK", Value: "0"}),
			want: claim.Settings{ClaimName: "c", ClaimUID: "uid-1", Env: []claim.EnvVar{{Name: "TASK", Value: "42"}}},
			warm: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.tpl.DeepCopy()
			got, warm := warmSettings(tt.claim, tt.tpl)
			if warm != tt.warm {
				t.Fatalf("warm = %v, want %v", warm, tt.warm)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.tpl); diff != "" {
				t.Errorf("template changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSetSettingsDelivered(t *testing.T) {
	warm := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "warm-1", Labels: map[string]string{agentsv1beta1.LaunchTypeLabel: agentsv1beta1.LaunchTypeWarm}}}
	locked := warm.DeepCopy()
	locked.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "sandboxd"}}
	blueprint.LockUntilClaimed(&locked.Spec.PodTemplate.Spec)
	tampered := metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionFalse,
		Reason: extensionsv1beta1.ClaimReasonWarmMemberTampered, Message: "bound elsewhere", ObservedGeneration: 2}
	cold := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{agentsv1beta1.LaunchTypeLabel: agentsv1beta1.LaunchTypeCold}}}
	failed := metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionFalse,
		Reason: extensionsv1beta1.ClaimReasonSettingsFailed, Message: "gave up", ObservedGeneration: 2}
	tests := []struct {
		name   string
		env    bool
		before []metav1.Condition
		sb     *agentsv1beta1.Sandbox
		err    error
		want   []metav1.Condition
	}{
		{name: "no env, member not locked: never set, and a stale one removed", before: []metav1.Condition{delivered("warm-1")}, sb: warm},
		{name: "no env, locked member bound", sb: locked, want: []metav1.Condition{delivered("warm-1")}},
		{name: "no env keeps the record of a tampered member", before: []metav1.Condition{tampered}, sb: cold, want: []metav1.Condition{tampered}},
		{
			name: "delivered to a warm Sandbox", env: true, sb: warm,
			want: []metav1.Condition{delivered("warm-1")},
		},
		{
			name: "pending", env: true, sb: warm, err: &settingsError{reason: extensionsv1beta1.ClaimReasonSettingsPending, msg: "no route"},
			want: []metav1.Condition{{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionFalse, ObservedGeneration: 2,
				Reason: extensionsv1beta1.ClaimReasonSettingsPending, Message: "no route"}},
		},
		{
			name: "failure joined with the discard", env: true,
			err:  errors.Join(&settingsError{reason: extensionsv1beta1.ClaimReasonSettingsFailed, msg: "gave up"}, newError(errCreatePending, "deleting")),
			want: []metav1.Condition{failed},
		},
		{name: "a cold Sandbox keeps the record of the fallback", env: true, before: []metav1.Condition{failed}, sb: cold, want: []metav1.Condition{failed}},
		{name: "another error changes nothing", env: true, before: []metav1.Condition{failed}, sb: warm, err: errors.New("api down"), want: []metav1.Condition{failed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claimWithEnv()
			if tt.env {
				c.Spec.Env = []extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}}
			}
			c.Generation = 2
			c.Status.Conditions = append([]metav1.Condition(nil), tt.before...)
			setSettingsDelivered(c, tt.sb, tt.err)
			if diff := cmp.Diff(tt.want, c.Status.Conditions, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func delivered(sandbox string) metav1.Condition {
	return metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionTrue, ObservedGeneration: 2,
		Reason: extensionsv1beta1.ClaimReasonSettingsDelivered, Message: `sandboxd in warm Sandbox "` + sandbox + `" is bound to the claim and has its env`}
}
