package sandboxclaim

// Claim settings: a warm member of a sandboxd template (extensionsv1beta1.RuntimeAnnotation)
// starts locked. After adoption the controller PUTs the claim's identity, and its env if any, to
// sandboxd's /v1/claim-settings with the member's control token, which binds and unlocks it, and
// only then lets the claim turn Ready. A 409 means somebody bound the member first: it is
// deleted and the claim served cold. The design is docs/design/sandboxd-claim-settings.md and
// docs/design/credentials.md. This file is the policy: when to send, retry and give up; the
// protocol (token, address, statuses) is internal/sandboxdclient's.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxdclient"
)

// ReasonClaimSettingsFailed is the Warning event of a claim whose warm Sandbox could not take its
// env and is replaced by a cold one.
const ReasonClaimSettingsFailed = extensionsv1beta1.ClaimReasonSettingsFailed

// defaultSettingsGiveUp is ClaimSettingsOptions.GiveUpAfter's default.
const defaultSettingsGiveUp = 10 * time.Second

// ClaimSettingsOptions configure how a claim's env reaches sandboxd in a warm Sandbox.
type ClaimSettingsOptions struct {
	// Address returns host:port of the sandboxd REST API of a bound Sandbox. The default
	// (sandboxdclient's) is its first status.podIPs entry and port 8080. Tests resolve to a sandboxd on loopback, since a
	// Pod IP in a test API server reaches nothing.
	Address func(*agentsv1beta1.Sandbox) (string, error)
	// Client sends the requests; the default ignores proxy settings and gives up after 5s.
	Client *http.Client
	// GiveUpAfter is how long deliveries may keep failing, for reasons a retry can fix, before
	// the claim falls back to a cold Sandbox (default 10s). Refusals fall back at once.
	GiveUpAfter time.Duration
}

// needsSettings reports whether a Sandbox bound to claim waits for claim settings: a warm one
// that starts sandboxd locked, or that takes the claim's env.
func needsSettings(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) bool {
	if sb == nil || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeWarm {
		return false
	}
	return len(c.Spec.Env) > 0 || blueprint.LockedUntilClaimed(&sb.Spec.PodTemplate.Spec)
}

// warmSettings returns the settings that let a warm member of tpl serve a claim with env, or
// false when the claim must start cold: the template's runtime is not sandboxd, an entry is meant
// for a container other than the first (the one running sandboxd), or the template's policy
// rejects the env, which the cold path then reports exactly as upstream does.
func warmSettings(c *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) (claim.Settings, bool) {
	containers := tpl.Spec.PodTemplate.Spec.Containers
	if len(c.Spec.Env) == 0 || !blueprint.RunsSandboxd(tpl) || len(containers) == 0 {
		return claim.Settings{}, false
	}
	spec := tpl.Spec.PodTemplate.Spec.DeepCopy()
	if blueprint.InjectEnv(spec, c.Spec.Env, tpl.Spec.EnvVarsInjectionPolicy) != nil {
		return claim.Settings{}, false
	}
	s := claim.Settings{ClaimName: c.Name, ClaimUID: string(c.UID)}
	for _, e := range c.Spec.Env {
		if e.ContainerName != "" && e.ContainerName != containers[0].Name {
			return claim.Settings{}, false
		}
		s.Env = append(s.Env, claim.EnvVar{Name: e.Name, Value: e.Value})
	}
	return s, true
}

// servesWarm reports whether a claim may take a warm member of tpl: one without env always,
// one with env only through claim settings, which need the credentials key. A claim that fell
// back to a cold Sandbox never tries a warm one again.
func (r *Reconciler) servesWarm(c *extensionsv1beta1.SandboxClaim, tpl *extensionsv1beta1.SandboxTemplate) bool {
	if r.settingsFellBack(c) || r.resizeFellBack(c) {
		return false
	}
	if len(c.Spec.Env) == 0 {
		return true
	}
	_, ok := warmSettings(c, tpl)
	return ok && r.opts.CredentialsKey != nil
}

func (r *Reconciler) settingsFellBack(c *extensionsv1beta1.SandboxClaim) bool {
	return r.memory.of(c.UID).fellBack != nil || fallbackRecorded(c)
}

// alreadyDelivered reports whether sandboxd has the claim's settings, as the claim's condition or
// this process's memory says. Settings are sent once: like a cold Pod's env, they do not follow
// later edits of spec.env, and a failed resend must never cost a claim the Sandbox it uses.
func (r *Reconciler) alreadyDelivered(c *extensionsv1beta1.SandboxClaim) bool {
	return r.memory.of(c.UID).delivered || meta.IsStatusConditionTrue(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered)
}

// deliverClaimSettings is the claim-settings step of a pass, after bind. It does nothing for a
// Sandbox that is cold, or warm but neither locked nor given env. Otherwise it binds sandboxd to
// the claim (with its env) unless that was done already; the claim is not Ready until it was. A
// delivery that cannot succeed discards the warm Sandbox, and the claim starts cold.
func (r *Reconciler) deliverClaimSettings(ctx context.Context, c *extensionsv1beta1.SandboxClaim,
	sb *agentsv1beta1.Sandbox, bindErr error) (*agentsv1beta1.Sandbox, error) {
	if bindErr != nil || !needsSettings(c, sb) {
		return sb, bindErr
	}
	if r.settingsFellBack(c) {
		return nil, r.discardWarm(ctx, c, sb, "could not take the claim's env")
	}
	if r.alreadyDelivered(c) {
		return sb, nil
	}
	if !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		// A sandboxd still starting cannot answer; its Ready transition brings the next pass.
		return sb, &settingsError{reason: extensionsv1beta1.ClaimReasonSettingsPending,
			msg: fmt.Sprintf("waiting for Sandbox %q to be Ready to send it the claim's env", sb.Name)}
	}
	mem := r.memory.of(c.UID)
	err := r.putClaimSettings(ctx, c, sb)
	if err == nil {
		mem.failingSince, mem.delivered = time.Time{}, true
		ctrl.LoggerFrom(ctx).V(2).Info("Delivered claim settings", "claim", klog.KObj(c), "sandbox", sb.Name)
		return sb, nil
	}
	now := r.opts.Clock.Now()
	if mem.failingSince.IsZero() {
		mem.failingSince = now
	}
	msg := fmt.Sprintf("sending the claim's env to sandboxd in Sandbox %q: %v", sb.Name, err)
	if !permanent(err) && now.Sub(mem.failingSince) < r.opts.ClaimSettings.GiveUpAfter {
		return sb, &settingsError{reason: extensionsv1beta1.ClaimReasonSettingsPending, msg: msg}
	}
	mem.failingSince = time.Time{}
	if !permanent(err) && r.boundToClaim(ctx, c, sb) {
		// A PUT whose answer was lost (timed out, connection cut) may have been applied: sandboxd
		// is then unlocked and may already serve the claim's holder (the E2B front door answers
		// create as soon as it does). Discarding that Sandbox would cut its holder off.
		mem.delivered = true
		ctrl.LoggerFrom(ctx).Info("Claim settings were applied though their answer was lost", "claim", klog.KObj(c), "sandbox", sb.Name)
		return sb, nil
	}
	reason := extensionsv1beta1.ClaimReasonSettingsFailed
	if errors.Is(err, sandboxdclient.ErrBoundElsewhere) {
		// Somebody reached the unclaimed member before the controller: never hand it out.
		reason = extensionsv1beta1.ClaimReasonWarmMemberTampered
		msg = fmt.Sprintf("sandboxd in warm Sandbox %q was already bound to another claim: somebody reached it before the controller", sb.Name)
	}
	msg += "; discarding the warm Sandbox and starting a cold one"
	mem.fellBack = &metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionFalse,
		ObservedGeneration: c.Generation, Reason: reason, Message: msg}
	r.event(c, corev1.EventTypeWarning, reason, "Adoption", msg)
	return nil, errors.Join(&settingsError{reason: reason, msg: msg}, r.discardWarm(ctx, c, sb, "could not take the claim's env"))
}

// discardWarm deletes a warm Sandbox the claim gave up on; the claim's next passes create a cold
// one once the cache no longer shows it. The preconditions make sure the delete hits the Sandbox
// this pass saw; on a conflict the next pass, which still finds it bound, tries again. why says
// what the Sandbox could not do.
func (r *Reconciler) discardWarm(ctx context.Context, c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, why string) error {
	if err := r.client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID, ResourceVersion: &sb.ResourceVersion}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting warm Sandbox %q of claim %q, which %s: %w", sb.Name, c.Name, why, err)
	}
	return newError(errCreatePending, "warm Sandbox %q %s and is being deleted; a cold Sandbox follows", sb.Name, why)
}

// permanentError is a claim that cannot be served warm any more, whatever sandboxd would answer.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// permanent reports whether retrying a failed delivery cannot help: the claim cannot be served
// warm any more, or sandboxd refused the settings.
func permanent(err error) bool {
	var perm *permanentError
	return errors.As(err, &perm) || sandboxdclient.Permanent(err)
}

// putClaimSettings binds sandboxd to the claim, with its env, using the Sandbox's control token.
// A claim without env needs no template: its settings are its name and UID.
func (r *Reconciler) putClaimSettings(ctx context.Context, c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) error {
	settings := claim.Settings{ClaimName: c.Name, ClaimUID: string(c.UID)}
	if len(c.Spec.Env) > 0 {
		_, tpl, err := r.poolAndTemplate(ctx, c)
		if err != nil {
			return err
		}
		var ok bool
		if settings, ok = warmSettings(c, tpl); !ok {
			return &permanentError{fmt.Errorf("template %q no longer accepts this claim's env through claim settings", tpl.Name)}
		}
	}
	if r.opts.CredentialsKey == nil {
		return &permanentError{fmt.Errorf("no credentials key to derive Sandbox %q's control token: the controller runs with --sandbox-credentials=false", sb.Name)}
	}
	return r.sandboxd.PutClaimSettings(ctx, sb, settings)
}

// boundToClaim asks sandboxd whether it is bound to the claim; any failure to tell is false.
func (r *Reconciler) boundToClaim(ctx context.Context, c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) bool {
	status, err := r.sandboxd.ClaimSettings(ctx, sb)
	return err == nil && status.ClaimUID == string(c.UID)
}
