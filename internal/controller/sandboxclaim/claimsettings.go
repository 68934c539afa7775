package sandboxclaim

// Claim settings: a warm member of a sandboxd template (extensionsv1beta1.RuntimeAnnotation)
// starts locked. After adoption the controller PUTs the claim's identity, and its env if any, to
// sandboxd's /v1/claim-settings with the member's control token, which binds and unlocks it, and
// only then lets the claim turn Ready. A 409 means somebody bound the member first: it is
// deleted and the claim served cold. The design is docs/design/sandboxd-claim-settings.md and
// docs/design/credentials.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

// ReasonClaimSettingsFailed is the Warning event of a claim whose warm Sandbox could not take its
// env and is replaced by a cold one.
const ReasonClaimSettingsFailed = extensionsv1beta1.ClaimReasonSettingsFailed

// Defaults of ClaimSettingsOptions.
const (
	defaultSettingsGiveUp  = 10 * time.Second
	defaultSettingsTimeout = 5 * time.Second
)

// ClaimSettingsOptions configure how a claim's env reaches sandboxd in a warm Sandbox.
type ClaimSettingsOptions struct {
	// Address returns host:port of the sandboxd REST API of a bound Sandbox. The default is its
	// first status.podIPs entry and port 8080. Tests resolve to a sandboxd on loopback, since a
	// Pod IP in a test API server reaches nothing.
	Address func(*agentsv1beta1.Sandbox) (string, error)
	// Client sends the requests; the default ignores proxy settings and gives up after 5s.
	Client *http.Client
	// GiveUpAfter is how long deliveries may keep failing, for reasons a retry can fix, before
	// the claim falls back to a cold Sandbox (default 10s). Refusals fall back at once.
	GiveUpAfter time.Duration
}

// settingsDelivery is the claim-settings state of one controller process.
type settingsDelivery struct {
	opts ClaimSettingsOptions
	// failures holds, by claim UID, when the current run of failed deliveries began.
	failures sync.Map
	// delivered marks, by claim UID, claims whose settings sandboxd has, so that a pass on a
	// cache without the SettingsDelivered condition does not send them again.
	delivered sync.Map
	// fellBack holds, by claim UID, the SettingsFailed condition of a claim that gave up on its
	// warm Sandbox, so that a pass on a cache without it neither tries warm again nor drops it.
	fellBack sync.Map
}

func newSettingsDelivery(o ClaimSettingsOptions) *settingsDelivery {
	if o.Address == nil {
		o.Address = podAddress
	}
	if o.Client == nil {
		// Straight to the Pod: a proxy from the controller's environment must not see the token.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.Proxy = nil
		o.Client = &http.Client{Timeout: defaultSettingsTimeout, Transport: transport}
	}
	if o.GiveUpAfter <= 0 {
		o.GiveUpAfter = defaultSettingsGiveUp
	}
	return &settingsDelivery{opts: o}
}

func (d *settingsDelivery) forget(uid types.UID) {
	d.failures.Delete(uid)
	d.delivered.Delete(uid)
	d.fellBack.Delete(uid)
}

// podAddress is sandboxd's REST address in the Sandbox's Pod.
func podAddress(sb *agentsv1beta1.Sandbox) (string, error) {
	if len(sb.Status.PodIPs) == 0 {
		return "", fmt.Errorf("sandbox %q has no pod IP yet", sb.Name)
	}
	return net.JoinHostPort(sb.Status.PodIPs[0], strconv.Itoa(sandboxd.RESTPort)), nil
}

// needsSettings reports whether a Sandbox bound to claim waits for claim settings: a warm one
// that starts sandboxd locked, or that takes the claim's env.
func needsSettings(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) bool {
	if sb == nil || sb.Labels[agentsv1beta1.LaunchTypeLabel] != agentsv1beta1.LaunchTypeWarm {
		return false
	}
	return len(c.Spec.Env) > 0 || blueprint.LockedUntilClaimed(&sb.Spec.PodTemplate.Spec)
}

// settingsError is a pass that could not deliver a claim's settings; reason is the claim's Ready
// and SettingsDelivered reason.
type settingsError struct {
	reason string
	msg    string
}

func (e *settingsError) Error() string { return e.msg }

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
	if r.settingsFellBack(c) {
		return false
	}
	if len(c.Spec.Env) == 0 {
		return true
	}
	_, ok := warmSettings(c, tpl)
	return ok && r.opts.CredentialsKey != nil
}

func (r *Reconciler) settingsFellBack(c *extensionsv1beta1.SandboxClaim) bool {
	_, marked := r.settings.fellBack.Load(c.UID)
	return marked || fallbackRecorded(c)
}

// fallbackRecorded reports whether the claim's status records that it gave up a warm Sandbox.
func fallbackRecorded(c *extensionsv1beta1.SandboxClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered)
	return cond != nil && (cond.Reason == extensionsv1beta1.ClaimReasonSettingsFailed || cond.Reason == extensionsv1beta1.ClaimReasonWarmMemberTampered)
}

// recallFallback puts back the SettingsFailed condition this process wrote when the claim as read
// from the cache does not show it yet: the status written from this view must keep it.
func (r *Reconciler) recallFallback(c *extensionsv1beta1.SandboxClaim) {
	v, ok := r.settings.fellBack.Load(c.UID)
	if !ok {
		return
	}
	if !fallbackRecorded(c) {
		meta.SetStatusCondition(&c.Status.Conditions, v.(metav1.Condition))
	}
}

// alreadyDelivered reports whether sandboxd has the claim's settings, as the claim's condition or
// this process's memory says. Settings are sent once: like a cold Pod's env, they do not follow
// later edits of spec.env, and a failed resend must never cost a claim the Sandbox it uses.
func (r *Reconciler) alreadyDelivered(c *extensionsv1beta1.SandboxClaim) bool {
	if _, ok := r.settings.delivered.Load(c.UID); ok {
		return true
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, extensionsv1beta1.ClaimConditionSettingsDelivered)
}

// deliverClaimSettings is the claim-settings step of a pass, after bind. It does nothing for a
// Sandbox that is cold, or warm but neither locked nor given env. Otherwise it binds sandboxd to
// the claim (with its env) unless that was done already; the claim is not Ready until it was. A
// delivery that cannot succeed discards the warm Sandbox, and the claim starts cold.
func (r *Reconciler) deliverClaimSettings(ctx context.Context, c *extensionsv1beta1.SandboxClaim,
	sb *agentsv1beta1.Sandbox, bindErr error) (*agentsv1beta1.Sandbox, error) {
	r.recallFallback(c)
	if bindErr != nil || !needsSettings(c, sb) {
		return sb, bindErr
	}
	if r.settingsFellBack(c) {
		return nil, r.discardWarm(ctx, c, sb)
	}
	if r.alreadyDelivered(c) {
		return sb, nil
	}
	if !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		// A sandboxd still starting cannot answer; its Ready transition brings the next pass.
		return sb, &settingsError{reason: extensionsv1beta1.ClaimReasonSettingsPending,
			msg: fmt.Sprintf("waiting for Sandbox %q to be Ready to send it the claim's env", sb.Name)}
	}
	err := r.putClaimSettings(ctx, c, sb)
	if err == nil {
		r.settings.failures.Delete(c.UID)
		r.settings.delivered.Store(c.UID, true)
		ctrl.LoggerFrom(ctx).V(2).Info("Delivered claim settings", "claim", klog.KObj(c), "sandbox", sb.Name)
		return sb, nil
	}
	now := r.opts.Clock.Now()
	since, _ := r.settings.failures.LoadOrStore(c.UID, now)
	msg := fmt.Sprintf("sending the claim's env to sandboxd in Sandbox %q: %v", sb.Name, err)
	var perm *permanentError
	if !errors.As(err, &perm) && now.Sub(since.(time.Time)) < r.settings.opts.GiveUpAfter {
		return sb, &settingsError{reason: extensionsv1beta1.ClaimReasonSettingsPending, msg: msg}
	}
	if !errors.As(err, &perm) && r.boundToClaim(ctx, c, sb) {
		// A PUT whose answer was lost (timed out, connection cut) may have been applied: sandboxd
		// is then unlocked and may already serve the claim's holder (the E2B front door answers
		// create as soon as it does). Discarding that Sandbox would cut its holder off.
		r.settings.failures.Delete(c.UID)
		r.settings.delivered.Store(c.UID, true)
		ctrl.LoggerFrom(ctx).Info("Claim settings were applied though their answer was lost", "claim", klog.KObj(c), "sandbox", sb.Name)
		return sb, nil
	}
	r.settings.failures.Delete(c.UID)
	reason := extensionsv1beta1.ClaimReasonSettingsFailed
	if errors.Is(err, errBoundElsewhere) {
		// Somebody reached the unclaimed member before the controller: never hand it out.
		reason = extensionsv1beta1.ClaimReasonWarmMemberTampered
		msg = fmt.Sprintf("sandboxd in warm Sandbox %q was already bound to another claim: somebody reached it before the controller", sb.Name)
	}
	msg += "; discarding the warm Sandbox and starting a cold one"
	r.settings.fellBack.Store(c.UID, metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, Status: metav1.ConditionFalse,
		ObservedGeneration: c.Generation, Reason: reason, Message: msg})
	r.event(c, corev1.EventTypeWarning, reason, "Adoption", msg)
	return nil, errors.Join(&settingsError{reason: reason, msg: msg}, r.discardWarm(ctx, c, sb))
}

// discardWarm deletes a warm Sandbox the claim gave up on; the claim's next passes create a cold
// one once the cache no longer shows it. The preconditions make sure the delete hits the Sandbox
// this pass saw; on a conflict the next pass, which still finds it bound, tries again.
func (r *Reconciler) discardWarm(ctx context.Context, c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) error {
	if err := r.client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID, ResourceVersion: &sb.ResourceVersion}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting warm Sandbox %q of claim %q after claim settings failed: %w", sb.Name, c.Name, err)
	}
	return newError(errCreatePending, "warm Sandbox %q could not take the claim's env and is being deleted; a cold Sandbox follows", sb.Name)
}

// permanentError is a delivery failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// errBoundElsewhere is sandboxd's 409: it is bound to another claim already.
var errBoundElsewhere = errors.New("sandboxd is bound to another claim")

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
	token := credentials.ControlToken(r.opts.CredentialsKey, sb.Namespace, sb.Name, sb.UID)
	addr, err := r.settings.opts.Address(sb)
	if err != nil {
		return err
	}
	body, err := json.Marshal(settings)
	if err != nil {
		return &permanentError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+"/v1/claim-settings", bytes.NewReader(body))
	if err != nil {
		return &permanentError{err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.settings.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return responseError(resp)
}

// boundToClaim asks sandboxd (GET /v1/claim-settings, with the control token) whether it is bound
// to the claim; any failure to tell is false.
func (r *Reconciler) boundToClaim(ctx context.Context, c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) bool {
	addr, err := r.settings.opts.Address(sb)
	if err != nil || r.opts.CredentialsKey == nil {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/claim-settings", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+credentials.ControlToken(r.opts.CredentialsKey, sb.Namespace, sb.Name, sb.UID))
	resp, err := r.settings.opts.Client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var status claim.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&status) != nil {
		return false
	}
	return status.ClaimUID == string(c.UID)
}

// responseError turns sandboxd's answer into nil on 200, or an error carrying its message.
// Authentication, conflicts and bad requests are permanent; other statuses may pass.
func responseError(resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	err := fmt.Errorf("sandboxd answered %s: %s", resp.Status, bytes.TrimSpace(text))
	switch resp.StatusCode {
	case http.StatusConflict:
		return &permanentError{fmt.Errorf("%w: %w", errBoundElsewhere, err)}
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusRequestEntityTooLarge:
		return &permanentError{err}
	}
	return err
}

// setSettingsDelivered sets the SettingsDelivered condition from the pass's outcome. It is left
// as it was when the pass learnt nothing new: a cold Sandbox keeps the record of why the claim
// went cold. A claim that neither needed settings nor fell back has no such condition.
func setSettingsDelivered(c *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, err error) {
	cond := metav1.Condition{Type: extensionsv1beta1.ClaimConditionSettingsDelivered, ObservedGeneration: c.Generation}
	var se *settingsError
	switch {
	case errors.As(err, &se):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, se.reason, se.msg
	case err == nil && needsSettings(c, sb):
		cond.Status, cond.Reason = metav1.ConditionTrue, extensionsv1beta1.ClaimReasonSettingsDelivered
		cond.Message = fmt.Sprintf("sandboxd in warm Sandbox %q is bound to the claim and has its env", sb.Name)
	case len(c.Spec.Env) == 0 && !fallbackRecorded(c):
		meta.RemoveStatusCondition(&c.Status.Conditions, cond.Type)
		return
	default:
		return
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}
