package sdk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

// CreatedBy is the value of the created-by label on claims made by this SDK.
const CreatedBy = "go-client"

// defaultGenerateName prefixes claim names when ClaimOptions sets neither Name nor GenerateName.
const defaultGenerateName = "sandbox-claim-"

// cleanupTimeout bounds deleting a half-created claim after the caller's context has ended.
const cleanupTimeout = 30 * time.Second

// Options configure a Client. The zero value reaches runtimes directly at the pod IP on port 8888.
type Options struct {
	// RouterURL, when set, sends runtime requests to the sandbox-router at this base URL with the
	// X-Sandbox-* routing headers, instead of straight to the pod IP.
	RouterURL string
	// RuntimePort is the runtime's port on the pod (default 8888, the legacy runtime API that
	// sandboxd and the Python runtime both serve). Through the router it is sent as X-Sandbox-Port.
	RuntimePort int
	// GRPCPort is sandboxd's gRPC port on the pod (default 9090), used by Runtime.Stream in
	// direct mode.
	GRPCPort int
	// RESTPort is sandboxd's REST filesystem API port on the pod (default 8080), used by
	// Sandbox.Files. Through the router it is sent as X-Sandbox-Port.
	RESTPort int
	// InterpreterPort is sandboxd's code interpreter port on the pod (default 49999, its
	// --interpreter-port in the code-interpreter template), used by Sandbox.Interpreter. Through
	// the router it is sent as X-Sandbox-Port.
	InterpreterPort int
	// Token, when set, is sent as "Authorization: Bearer <token>": to the router, the caller's
	// own credential; straight to a pod, it replaces the sandbox token that is otherwise read
	// from the Sandbox's Secret "<sandbox>-credentials" (data key "token").
	Token string
	// HTTPClient carries runtime requests; nil means a client with no proxy from the environment.
	HTTPClient *http.Client
}

// Client claims sandboxes from warm pools on one cluster.
type Client struct {
	kube client.WithWatch
	opts Options
}

// New returns a Client for the cluster at cfg.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the API scheme: %w", err)
		}
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	return NewWithClient(kube, opts)
}

// NewWithClient returns a Client over an existing controller-runtime client whose scheme knows
// the agents.x-k8s.io and extensions.agents.x-k8s.io types.
func NewWithClient(kube client.WithWatch, opts Options) (*Client, error) {
	if opts.RuntimePort == 0 {
		opts.RuntimePort = defaultRuntimePort
	}
	if opts.GRPCPort == 0 {
		opts.GRPCPort = defaultGRPCPort
	}
	if opts.RESTPort == 0 {
		opts.RESTPort = defaultRESTPort
	}
	if opts.InterpreterPort == 0 {
		opts.InterpreterPort = sandboxd.InterpreterPort
	}
	if opts.RuntimePort < 1 || opts.RuntimePort > 65535 {
		return nil, fmt.Errorf("Options.RuntimePort=%d: must be between 1 and 65535 (the runtime's port on the pod, default 8888)", opts.RuntimePort)
	}
	if opts.GRPCPort < 1 || opts.GRPCPort > 65535 {
		return nil, fmt.Errorf("Options.GRPCPort=%d: must be between 1 and 65535 (sandboxd's gRPC port on the pod, default 9090)", opts.GRPCPort)
	}
	if opts.RESTPort < 1 || opts.RESTPort > 65535 {
		return nil, fmt.Errorf("Options.RESTPort=%d: must be between 1 and 65535 (sandboxd's REST port on the pod, default 8080)", opts.RESTPort)
	}
	if opts.InterpreterPort < 1 || opts.InterpreterPort > 65535 {
		return nil, fmt.Errorf("Options.InterpreterPort=%d: must be between 1 and 65535 (sandboxd's code interpreter port on the pod, default 49999)", opts.InterpreterPort)
	}
	return &Client{kube: kube, opts: opts}, nil
}

// ClaimOptions describe the SandboxClaim to create.
type ClaimOptions struct {
	// WarmPool names the SandboxWarmPool to claim from (required).
	WarmPool string
	// Namespace of the pool and claim; "default" when empty.
	Namespace string
	// Name of the claim; when empty the API server generates one from GenerateName
	// (default "sandbox-claim-").
	Name, GenerateName string
	// Labels on the claim. The created-by label is always set to "go-client".
	Labels map[string]string
	// Annotations on the claim. client-first-requested-at is set unless already present.
	Annotations map[string]string
	// Env is injected into the sandbox's containers, if the template's policy allows it.
	Env []extensionsv1beta1.EnvVar
	// PodLabels and PodAnnotations are added to the sandbox's Pod (spec.additionalPodMetadata).
	PodLabels, PodAnnotations map[string]string
	// Lifecycle sets when the claim shuts down and what happens then.
	Lifecycle *extensionsv1beta1.Lifecycle
}

func (o *ClaimOptions) validate() error {
	switch {
	case o.WarmPool == "":
		return errors.New("ClaimOptions.WarmPool is empty: name the SandboxWarmPool to claim from")
	case o.Name != "" && o.GenerateName != "":
		return fmt.Errorf("ClaimOptions.Name=%q and GenerateName=%q are both set: set one", o.Name, o.GenerateName)
	}
	return nil
}

// buildClaim is the SandboxClaim that Claim creates; now is when the caller asked.
func buildClaim(o ClaimOptions, now time.Time) *extensionsv1beta1.SandboxClaim {
	claim := &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace, Name: o.Name, GenerateName: o.GenerateName,
			Labels:      maps.Clone(o.Labels),
			Annotations: maps.Clone(o.Annotations),
		},
		Spec: extensionsv1beta1.SandboxClaimSpec{
			WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: o.WarmPool},
			Env:         o.Env,
			Lifecycle:   o.Lifecycle,
			AdditionalPodMetadata: extensionsv1beta1.AdditionalPodMetadata{
				Annotations: maps.Clone(o.PodAnnotations),
			},
		},
	}
	if claim.Name == "" && claim.GenerateName == "" {
		claim.GenerateName = defaultGenerateName
	}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	claim.Labels[agentsv1beta1.CreatedByLabel] = CreatedBy
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	if _, ok := claim.Annotations[extensionsv1beta1.ClientFirstRequestedAtAnnotation]; !ok {
		claim.Annotations[extensionsv1beta1.ClientFirstRequestedAtAnnotation] = now.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range o.PodLabels {
		if claim.Spec.AdditionalPodMetadata.Labels == nil {
			claim.Spec.AdditionalPodMetadata.Labels = map[string]extensionsv1beta1.LabelValue{}
		}
		claim.Spec.AdditionalPodMetadata.Labels[k] = extensionsv1beta1.LabelValue(v)
	}
	return claim
}

// Claim creates a SandboxClaim from a warm pool and waits, with a watch bounded by ctx, until it
// is Ready. On any failure after the claim was created it deletes the claim again, so a failed
// Claim leaves nothing behind. Errors are *ClaimError wrapping ErrPoolNotFound, ErrNotReady,
// ErrClaimFailed or ErrSandboxGone.
func (c *Client) Claim(ctx context.Context, o ClaimOptions) (*Sandbox, error) {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := c.checkPool(ctx, o.Namespace, o.WarmPool); err != nil {
		return nil, err
	}
	claim := buildClaim(o, time.Now())
	if err := c.kube.Create(ctx, claim); err != nil {
		return nil, &ClaimError{Kind: ErrClaimFailed, Object: "SandboxClaim", Namespace: o.Namespace, Name: claim.Name,
			Detail: "creating the claim", Err: err}
	}
	ready, err := c.waitClaimReady(ctx, claim)
	if err != nil {
		return nil, errors.Join(err, c.deleteDetached(ctx, claim))
	}
	return c.newSandbox(ready), nil
}

// Attach returns the Sandbox of an existing claim, waiting like Claim until it is Ready, so a
// program can pick up a sandbox it claimed earlier. It never deletes the claim: the caller who
// created it owns it. A claim that does not exist is ErrSandboxGone; a sandbox suspended by hand
// is ErrSuspended at once rather than a wait that cannot end (Resume it instead); one the idle
// controller suspended with wake allowed is resumed and waited for.
func (c *Client) Attach(ctx context.Context, namespace, claimName string) (*Sandbox, error) {
	if namespace == "" {
		namespace = "default"
	}
	sb, err := c.Lookup(ctx, namespace, claimName)
	var ce *ClaimError
	switch {
	case errors.As(err, &ce) && ce.Kind == ErrNotReady:
		// Not bound to a sandbox yet: the wait below sees it bound and Ready.
	case err != nil:
		return nil, err
	default:
		idle, err := c.checkNotSuspended(ctx, sb)
		if err != nil {
			return nil, err
		}
		if idle {
			// Suspended for being idle, with wake allowed: picking it up is activity, so wake it.
			if err := sb.Resume(ctx); err != nil {
				return nil, err
			}
			return sb, nil
		}
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	claim.Namespace, claim.Name = namespace, claimName
	ready, err := c.waitClaimReady(ctx, claim)
	if err != nil {
		return nil, err
	}
	return c.newSandbox(ready), nil
}

// Lookup returns the Sandbox of an existing claim as it is now, without waiting: the handle
// for Suspend, Resume or Release of a claim in any state. A claim that does not exist is
// ErrSandboxGone; a claim not yet bound to a sandbox is ErrNotReady (with the returned
// Sandbox still naming the claim, so it can be Released).
func (c *Client) Lookup(ctx context.Context, namespace, claimName string) (*Sandbox, error) {
	if namespace == "" {
		namespace = "default"
	}
	if claimName == "" {
		return nil, errors.New("claim name is empty: name the SandboxClaim to pick up")
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claimName}, claim)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &ClaimError{Kind: ErrSandboxGone, Object: "SandboxClaim", Namespace: namespace, Name: claimName,
			Detail: "claim not found; list the claims to find its name, or claim a new sandbox"}
	case err != nil:
		return nil, fmt.Errorf("reading claim %s/%s: %w", namespace, claimName, err)
	}
	sb := c.newSandbox(claim)
	if sb.sandbox == "" {
		w := &waiter{object: "SandboxClaim", namespace: namespace, name: claimName}
		if ready := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady); ready != nil {
			w.last = *ready
		}
		return sb, w.fail(ErrNotReady, "claim is not bound to a sandbox yet", nil)
	}
	return sb, nil
}

// Resume sets the suspended sandbox of an existing claim running again and waits, with a
// watch bounded by ctx, until it is Ready; the returned Sandbox has the new Pod's IPs. Resuming
// a running sandbox just waits for Ready.
func (c *Client) Resume(ctx context.Context, namespace, claimName string) (*Sandbox, error) {
	sb, err := c.Lookup(ctx, namespace, claimName)
	if err != nil {
		return nil, err
	}
	if err := sb.Resume(ctx); err != nil {
		return nil, err
	}
	return sb, nil
}

// checkNotSuspended reads the claim's Sandbox and returns ErrSuspended when its operatingMode
// is Suspended by hand, or true when the idle controller suspended it and its policy lets a
// client wake it (paddock.dev/suspend-reason: Idle). It reads the spec, the desired state, so
// a Resume whose Pod is still starting is waited for rather than refused.
func (c *Client) checkNotSuspended(ctx context.Context, sb *Sandbox) (wakeable bool, err error) {
	obj := &agentsv1beta1.Sandbox{}
	err = c.kube.Get(ctx, client.ObjectKey{Namespace: sb.namespace, Name: sb.sandbox}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // the claim's Ready condition says what happened; the wait reports it
	case err != nil:
		return false, fmt.Errorf("reading sandbox %s/%s: %w", sb.namespace, sb.sandbox, err)
	case obj.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended:
		return false, nil
	case obj.Annotations[agentsv1beta1.SuspendReasonAnnotation] == agentsv1beta1.SuspendReasonIdle:
		return true, nil
	}
	return false, &ClaimError{Kind: ErrSuspended, Object: "SandboxClaim", Namespace: sb.namespace, Name: sb.claim,
		Detail: fmt.Sprintf("its sandbox %s is suspended; resume it first (Client.Resume, or paddock resume %s)", sb.sandbox, sb.claim)}
}

func (c *Client) checkPool(ctx context.Context, namespace, name string) error {
	pool := &extensionsv1beta1.SandboxWarmPool{}
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool)
	switch {
	case apierrors.IsNotFound(err):
		return &ClaimError{Kind: ErrPoolNotFound, Name: name, Namespace: namespace,
			Detail: fmt.Sprintf("warm pool %q not found in namespace %q; create it or pass an existing pool in ClaimOptions.WarmPool", name, namespace)}
	case err != nil:
		return fmt.Errorf("reading warm pool %q in namespace %q: %w", name, namespace, err)
	}
	return nil
}

func (c *Client) waitClaimReady(ctx context.Context, claim *extensionsv1beta1.SandboxClaim) (*extensionsv1beta1.SandboxClaim, error) {
	w := &waiter{object: "SandboxClaim", namespace: claim.Namespace, name: claim.Name}
	lw := newListWatch(c.kube, claim.Namespace, claim.Name, func() client.ObjectList { return &extensionsv1beta1.SandboxClaimList{} })
	obj, err := w.until(ctx, lw, &extensionsv1beta1.SandboxClaim{}, w.claimReady)
	if err != nil {
		return nil, err
	}
	return obj.(*extensionsv1beta1.SandboxClaim), nil
}

// deleteDetached deletes obj even though ctx may have ended, bounded by cleanupTimeout.
func (c *Client) deleteDetached(ctx context.Context, obj client.Object) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.kube.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cleaning up claim %s/%s failed, delete it yourself: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
