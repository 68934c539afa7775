package sandbox

// Per-Sandbox credentials (docs/design/credentials.md): the Secret "<sandbox>-credentials" holds
// the sandbox and control tokens derived from the installation's key, and every container of the
// Pod receives both through secretKeyRef. The Secret exists before the Pod is created, so no
// container ever starts without its tokens.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/kube"
)

// constructCredentials returns the credentials Secret sb should have.
func constructCredentials(sb *agentsv1beta1.Sandbox, owner metav1.OwnerReference, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            credentials.SandboxSecretName(sb.Name),
			Namespace:       sb.Namespace,
			Labels:          trackingLabels(sb),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			credentials.TokenDataKey:        []byte(credentials.SandboxToken(key, sb.Namespace, sb.Name, sb.UID)),
			credentials.ControlTokenDataKey: []byte(credentials.ControlToken(key, sb.Namespace, sb.Name, sb.UID)),
		},
	}
}

// withCredentialEnv gives every container of spec the sandbox and control tokens from the
// Secret named secret, and extra. Entries of the same names from the template are replaced: a
// template must not be able to choose a sandbox's tokens.
func withCredentialEnv(spec *corev1.PodSpec, secret string, extra ...corev1.EnvVar) {
	ref := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	ours := append([]corev1.EnvVar{
		ref(sandboxd.TokenEnv, credentials.TokenDataKey),
		ref(sandboxd.ControlTokenEnv, credentials.ControlTokenDataKey),
	}, extra...)
	for i := range spec.Containers {
		c := &spec.Containers[i]
		env := make([]corev1.EnvVar, 0, len(c.Env)+len(ours))
		for _, e := range c.Env {
			if !slices.ContainsFunc(ours, func(o corev1.EnvVar) bool { return o.Name == e.Name }) {
				env = append(env, e)
			}
		}
		c.Env = append(env, ours...)
	}
}

// reconcileCredentials makes sure sb's credentials Secret exists with the tokens of this Sandbox
// (this UID) and is controlled by it. It costs one create per Sandbox and nothing on later
// passes: the Secret is read from the cache, which holds only Secrets carrying the tracking label.
func (r *Reconciler) reconcileCredentials(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	if r.opts.CredentialsKey == nil {
		return nil
	}
	owner, err := r.ownerRef(sb)
	if err != nil {
		return err
	}
	want := constructCredentials(sb, owner, r.opts.CredentialsKey)
	got := &corev1.Secret{}
	err = r.client.Get(ctx, client.ObjectKeyFromObject(want), got)
	if apierrors.IsNotFound(err) {
		if err = r.create(ctx, want, "credentials secret "+want.Name); err == nil {
			ctrl.LoggerFrom(ctx).V(2).Info("Created credentials secret", "secret", klog.KObj(want))
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating credentials secret %q of sandbox %q: %w", want.Name, sb.Name, err)
		}
		// Created a pass ago and not in the cache yet, or somebody else's Secret of that name.
		err = r.reader().Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	if err != nil {
		return fmt.Errorf("reading credentials secret %q of sandbox %q: %w", want.Name, sb.Name, err)
	}
	return r.repairCredentials(ctx, sb, want, got)
}

// repairCredentials brings an existing Secret got in line with want. A Secret left by an earlier
// Sandbox of the same name (another UID, awaiting garbage collection) is taken over; a Secret
// that no Sandbox controls is not ours to overwrite.
func (r *Reconciler) repairCredentials(ctx context.Context, sb *agentsv1beta1.Sandbox, want, got *corev1.Secret) error {
	ownership := kube.OwnershipOf(got, sb.UID)
	if ownership == kube.OwnedByUs && bytes.Equal(got.Data[credentials.TokenDataKey], want.Data[credentials.TokenDataKey]) &&
		bytes.Equal(got.Data[credentials.ControlTokenDataKey], want.Data[credentials.ControlTokenDataKey]) &&
		got.Labels[agentsv1beta1.SandboxNameHashLabel] == want.Labels[agentsv1beta1.SandboxNameHashLabel] {
		return nil
	}
	if ownership != kube.OwnedByUs && !controlledBySandboxNamed(got, sb.Name) {
		return fmt.Errorf("secret %q exists and is controlled by %s, not by sandbox %q; delete or rename it so the controller can create the sandbox's credentials",
			got.Name, kube.DescribeController(got), sb.Name)
	}
	got.Labels = want.Labels
	got.OwnerReferences = want.OwnerReferences
	got.Data = want.Data
	got.Type = want.Type
	// Update carries the resourceVersion read: a concurrent change answers Conflict and the next
	// pass looks again.
	if err := r.client.Update(ctx, got, fieldOwner); err != nil {
		return fmt.Errorf("updating credentials secret %q of sandbox %q: %w", got.Name, sb.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Repaired credentials secret", "secret", klog.KObj(got))
	return nil
}

// controlledBySandboxNamed reports whether obj is controlled by a Sandbox named name: a
// predecessor of the Sandbox of that name.
func controlledBySandboxNamed(obj metav1.Object, name string) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == "Sandbox" && ref.Name == name &&
		ref.APIVersion == agentsv1beta1.GroupVersion.String()
}

// reader is the uncached reader when one was given, else the client.
func (r *Reconciler) reader() client.Reader { return r.apiReader }
