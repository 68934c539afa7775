package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/activity"
	"github.com/paddock-dev/paddock/internal/httpjson"
	"github.com/paddock-dev/paddock/internal/podresize"
)

// create serves POST /sandboxes: parse the body once, find the template's pool, create the claim,
// and answer once the claimed sandbox's daemon accepts its token.
func (f *FrontDoor) create(w http.ResponseWriter, r *http.Request, ns string) {
	var body e2bapi.CreateRequest
	if !readBody(w, r, &body) {
		return
	}
	req, err := parseCreate(body)
	if err != nil {
		status := http.StatusBadRequest
		var ref *refusal
		if errors.As(err, &ref) {
			status = ref.status
		}
		writeError(w, status, err.Error())
		return
	}
	pool, ref := f.poolForTemplate(r.Context(), ns, req.templateID)
	if ref != nil {
		writeError(w, ref.status, ref.msg)
		return
	}
	ctx, steps := withSteps(r.Context(), time.Now())
	_, sb, ref := f.startSandbox(ctx, ns, pool, req)
	if ref != nil {
		writeError(w, ref.status, ref.msg)
		return
	}
	if v := steps.header(); v != "" {
		w.Header().Set(serverTimingHeader, v)
	}
	httpjson.Write(w, http.StatusCreated, sb)
}

// startSandbox creates a claim of pool for req and waits until its sandbox's daemon accepts the
// sandbox's token: the claim and the create answer, or the refusal E2B's error body carries. A
// claim whose sandbox did not start is deleted: nobody will ever learn its ID.
func (f *FrontDoor) startSandbox(ctx context.Context, ns, pool string, req createRequest) (*extensionsv1beta1.SandboxClaim, e2bapi.Sandbox, *refusal) {
	// Without the credentials key no sandbox token can be handed out: refuse before writing.
	if err := f.cfg.Tokens.KeyErr(); err != nil {
		f.cfg.Log.Error(err, "E2B create refused")
		return nil, e2bapi.Sandbox{}, &refusal{http.StatusServiceUnavailable, err.Error()}
	}
	claim, err := f.createClaim(ctx, ns, pool, req)
	stepsOf(ctx).markClaimed(time.Now())
	if apierrors.IsInvalid(err) {
		// Admission refused the claim (the warm-resources policy names the metadata key at fault).
		return nil, e2bapi.Sandbox{}, badRequest("%v", err)
	}
	if err != nil {
		f.cfg.Log.Error(err, "E2B control-plane request failed")
		return nil, e2bapi.Sandbox{}, &refusal{http.StatusInternalServerError, err.Error()}
	}
	waitCtx, cancel := context.WithTimeout(ctx, f.cfg.CreateTimeout)
	defer cancel()
	sb, err := f.awaitDaemon(waitCtx, claim)
	if err == nil {
		var token string
		if token, err = f.sandboxToken(sb); err == nil {
			return claim, f.sandboxResponse(claim, token), nil
		}
	}
	if derr := f.client.Delete(context.Background(), claim, client.PropagationPolicy(metav1.DeletePropagationBackground)); derr != nil && !apierrors.IsNotFound(derr) {
		f.cfg.Log.Error(derr, "deleting the claim of a failed create", "claim", klog.KObj(claim))
	}
	f.cfg.Log.Info("E2B create failed", "claim", klog.KObj(claim), "err", err.Error())
	if errors.As(err, new(unservable)) {
		return nil, e2bapi.Sandbox{}, &refusal{http.StatusServiceUnavailable, fmt.Sprintf("sandbox for template %q cannot be served: %v", req.templateID, err)}
	}
	return nil, e2bapi.Sandbox{}, &refusal{http.StatusServiceUnavailable, fmt.Sprintf("sandbox for template %q was not ready in %s: %v", req.templateID, f.cfg.CreateTimeout, err)}
}

// createRequest is a create body parsed and checked once: everything its claim is built from.
type createRequest struct {
	templateID string
	// lifetime is the timeout: the claim's expiry, or with autoPause its idle timeout.
	lifetime time.Duration
	// autoPause suspends the sandbox at its timeout instead of deleting it.
	autoPause bool
	// autoResume lets traffic wake a sandbox autoPause suspended.
	autoResume bool
	// metadata is the metadata as the annotation holds it (JSON), "" for none.
	metadata string
	// env is envVars sorted by name.
	env []extensionsv1beta1.EnvVar
	// network are the claim's egress annotations (networkAnnotations), nil for none.
	network map[string]string
	// ruleSecret is the Secret the policy's inject entries read, and ruleValues what it holds
	// (network.rules' header values); nil when there are none.
	ruleSecret string
	ruleValues map[string][]byte
	// sharedRuleSecret is a fork's source's rules Secret, which the fork's claim comes to own
	// too (shareRuleSecret); "" for none.
	sharedRuleSecret string
	// resources are the metadata keys paddock.dev/cpu and paddock.dev/memory, which choose the
	// sandbox's resources within its pool's bounds (docs/design/warm-resources.md).
	resources map[string]string
}

// parseCreate checks a create body and returns what it asks for, or an error naming the field.
func parseCreate(body e2bapi.CreateRequest) (createRequest, error) {
	req := createRequest{templateID: body.TemplateID}
	if req.templateID == "" {
		req.templateID = e2bapi.DefaultTemplate
	}
	var err error
	if req.lifetime, err = timeoutOf(body.Timeout); err != nil {
		return req, err
	}
	if body.AutoPause != nil {
		req.autoPause = *body.AutoPause
	}
	if body.AutoResume != nil && body.AutoResume.Enabled != nil {
		req.autoResume = *body.AutoResume.Enabled
	}
	if req.autoResume && !req.autoPause {
		return req, errors.New("autoResume.enabled is true but autoPause is not: only a sandbox paused at its timeout (autoPause, the SDK's lifecycle.onTimeout \"pause\") can be resumed by traffic")
	}
	if len(body.Metadata) > 0 {
		b, err := json.Marshal(body.Metadata)
		if err != nil {
			return req, fmt.Errorf("encoding metadata: %w", err)
		}
		req.metadata = string(b)
	}
	for _, k := range []string{extensionsv1beta1.CPUAnnotation, extensionsv1beta1.MemoryAnnotation} {
		if v, ok := body.Metadata[k]; ok {
			if req.resources == nil {
				req.resources = map[string]string{}
			}
			req.resources[k] = v
		}
	}
	if _, err := podresize.Requested(req.resources); err != nil {
		return req, fmt.Errorf("metadata: %w", err)
	}
	for k, v := range body.EnvVars {
		if k == "" {
			return req, errors.New("envVars: a variable has an empty name; give every variable a name")
		}
		req.env = append(req.env, extensionsv1beta1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(req.env, func(i, j int) bool { return req.env[i].Name < req.env[j].Name })
	if req.ruleSecret, err = newRuleSecretName(); err != nil {
		return req, &refusal{http.StatusInternalServerError, err.Error()}
	}
	network, values, ref := networkAnnotations(body.Network, body.AllowInternetAccess, req.ruleSecret)
	if ref != nil {
		return req, ref
	}
	req.network, req.ruleValues = network, values
	return req, nil
}

// maxTimeoutSeconds bounds a sandbox's lifetime from now; E2B's own cap is 24 hours for paid
// teams, and a bound keeps the time arithmetic far from overflow.
const maxTimeoutSeconds = 7 * 24 * 3600

// timeoutOf returns the lifetime a request asks for, or the default, or an error naming the field.
func timeoutOf(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return e2bapi.DefaultTimeoutSeconds * time.Second, nil
	}
	if *seconds < 0 || *seconds > maxTimeoutSeconds {
		return 0, fmt.Errorf("timeout %d is out of range; give seconds between 0 and %d", *seconds, maxTimeoutSeconds)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// idlePolicy is the idle policy an autoPause sandbox's claim carries.
func (req createRequest) idlePolicy() activity.Policy {
	return activity.Policy{Timeout: req.lifetime, WakeOnRequest: req.autoResume}
}

// newClaim builds the SandboxClaim for an E2B create: named by the sandbox ID, from pool, with the
// metadata and template ID in annotations (and the metadata keys paddock.dev/cpu and memory as the
// claim's own annotations), envVars as env (served warm through claim settings when
// the pool's template opts in), and the timeout as an expiry that deletes the claim.
// With autoPause the timeout is the claim's idle timeout instead, and the claim never expires.
func newClaim(namespace, id, pool string, req createRequest, now time.Time) *extensionsv1beta1.SandboxClaim {
	c := &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: id, Namespace: namespace,
			Labels:      map[string]string{e2bapi.SandboxLabel: "true"},
			Annotations: map[string]string{e2bapi.TemplateAnnotation: req.templateID},
		},
		Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: pool}, Env: req.env},
	}
	if req.autoPause {
		maps.Copy(c.Annotations, req.idlePolicy().Annotations())
	} else {
		c.Spec.Lifecycle = expiry(now, req.lifetime)
	}
	if req.metadata != "" {
		c.Annotations[e2bapi.MetadataAnnotation] = req.metadata
	}
	maps.Copy(c.Annotations, req.network)
	switch {
	case req.ruleValues != nil:
		c.Annotations[e2bapi.RulesSecretAnnotation] = req.ruleSecret
	case req.sharedRuleSecret != "":
		c.Annotations[e2bapi.RulesSecretAnnotation] = req.sharedRuleSecret
	}
	maps.Copy(c.Annotations, req.resources)
	return c
}

// templateOf is the template ID the claim was created from, or its pool's name.
func templateOf(c *extensionsv1beta1.SandboxClaim) string {
	if t := c.Annotations[e2bapi.TemplateAnnotation]; t != "" {
		return t
	}
	return c.Spec.WarmPoolRef.Name
}

func expiry(now time.Time, lifetime time.Duration) *extensionsv1beta1.Lifecycle {
	at := metav1.NewTime(now.Add(lifetime).Truncate(time.Second))
	return &extensionsv1beta1.Lifecycle{ShutdownTime: &at, ShutdownPolicy: extensionsv1beta1.ShutdownPolicyDelete}
}

// createClaim creates the claim under a fresh ID; a clash of 100-bit IDs is retried once.
func (f *FrontDoor) createClaim(ctx context.Context, ns, pool string, req createRequest) (*extensionsv1beta1.SandboxClaim, error) {
	for attempt := 0; ; attempt++ {
		id, err := e2bapi.NewID()
		if err != nil {
			return nil, err
		}
		claim := newClaim(ns, id, pool, req, f.cfg.Now())
		err = f.client.Create(ctx, claim)
		if apierrors.IsAlreadyExists(err) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating SandboxClaim %s/%s: %w", ns, id, err)
		}
		if req.ruleValues != nil || req.sharedRuleSecret != "" {
			if err := f.claimRuleSecret(ctx, claim, req); err != nil {
				// Nobody learns the claim's ID: delete it (its Secret, if any, goes with it).
				if derr := f.client.Delete(ctx, claim); derr != nil && !apierrors.IsNotFound(derr) {
					err = fmt.Errorf("%w; deleting SandboxClaim %s/%s: %v", err, ns, id, derr)
				}
				return nil, err
			}
		}
		return claim, nil
	}
}

// claimRuleSecret gives claim its rules Secret: a new one with req's values, or a share of the
// fork source's.
func (f *FrontDoor) claimRuleSecret(ctx context.Context, claim *extensionsv1beta1.SandboxClaim, req createRequest) error {
	if req.ruleValues != nil {
		return f.createRuleSecret(ctx, claim, req.ruleSecret, req.ruleValues)
	}
	return f.shareRuleSecret(ctx, claim, req.sharedRuleSecret)
}

// poolFor finds the SandboxWarmPool serving templateID in ns: the pool of that name, else one
// labelled TemplateLabel=templateID.
func (f *FrontDoor) poolFor(ctx context.Context, ns, templateID string) (string, error) {
	var pool extensionsv1beta1.SandboxWarmPool
	err := f.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: templateID}, &pool)
	if err == nil {
		return pool.Name, nil
	}
	if !apierrors.IsNotFound(err) && !isInvalidName(err) {
		return "", err
	}
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := f.cache.List(ctx, &pools, client.InNamespace(ns), client.MatchingLabels{e2bapi.TemplateLabel: templateID}); err == nil && len(pools.Items) > 0 {
		return pools.Items[0].Name, nil
	}
	return "", fmt.Errorf("template %q not found: namespace %q has no SandboxWarmPool named %q or labelled %s=%s",
		templateID, ns, templateID, e2bapi.TemplateLabel, templateID)
}

func isInvalidName(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) }

// sandboxResponse is the create and connect answer.
func (f *FrontDoor) sandboxResponse(c *extensionsv1beta1.SandboxClaim, token string) e2bapi.Sandbox {
	s := e2bapi.Sandbox{SandboxID: c.Name, TemplateID: templateOf(c), ClientID: e2bapi.ClientID, EnvdVersion: e2bapi.EnvdVersion,
		EnvdAccessToken: token, TrafficAccessToken: token}
	if f.cfg.Domain != "" {
		s.Domain = ptr.To(f.cfg.Domain)
	}
	return s
}
