package sandbox

// Trust in the installation's egress CA (docs/design/egress.md, "CA trust"): paddock-egress
// terminates the TLS of requests that get headers with a leaf signed by a per-installation CA,
// so a Pod with an egress policy must trust that CA with no flag in the sandbox's code. The
// controller copies the CA's public certificate (never its key) into Secret EgressCAName of the
// sandbox's namespace, beside a bundle of Mozilla's roots (PublicRoots) and the CA, mounts
// both into every regular container of a policed Pod (or one whose template asks for it with
// egress.TrustCAAnnotation) and points the variables common clients read at them. Other Pods
// are left as they are.

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/crypto/x509roots/fallback/bundle"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
)

const (
	// EgressCAName names the Secret of public certificates in a sandbox's namespace, the Pod
	// volume holding it, and (by default) the installation's CA Secret in paddock-system.
	EgressCAName = "paddock-egress-ca"
	// EgressCADir is where a policed Pod's containers find the certificates.
	EgressCADir = "/etc/paddock/egress-ca"
	// EgressCAKey is the egress CA's certificate alone.
	EgressCAKey = "ca.crt"
	// EgressCABundleKey is PublicRoots followed by the egress CA.
	EgressCABundleKey = "ca-bundle.crt"
	// egressCALabel marks the namespace's Secret as the controller's, so a user's Secret of the
	// same name is never overwritten.
	egressCALabel = "paddock.dev/egress-ca"
)

// egressCAEnv are the variables common clients read for their trusted roots: OpenSSL (Python's
// ssl and urllib, Ruby, PHP), Go, curl, Python requests and pip, git, and Node (which adds the
// file to its own roots).
var egressCAEnv = []corev1.EnvVar{
	{Name: "SSL_CERT_FILE", Value: EgressCADir + "/" + EgressCABundleKey},
	{Name: "CURL_CA_BUNDLE", Value: EgressCADir + "/" + EgressCABundleKey},
	{Name: "REQUESTS_CA_BUNDLE", Value: EgressCADir + "/" + EgressCABundleKey},
	{Name: "PIP_CERT", Value: EgressCADir + "/" + EgressCABundleKey},
	{Name: "GIT_SSL_CAINFO", Value: EgressCADir + "/" + EgressCABundleKey},
	{Name: "NODE_EXTRA_CA_CERTS", Value: EgressCADir + "/" + EgressCAKey},
}

// PublicRoots are the roots bundled with the egress CA: Mozilla's NSS trust store as
// golang.org/x/crypto/x509roots/fallback carries it, in PEM, so the bundle is the same whatever
// the controller's image holds. Roots NSS trusts only until a date are left out: PEM cannot say
// so, and a client reading the file would trust them without the limit.
var PublicRoots = sync.OnceValue(func() []byte {
	var out bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return out.Bytes()
})

// egressCATrust makes sure sb's namespace holds the current egress CA certificate when sb's Pod
// will carry an egress policy or asks for the trust, and reports whether the Pod should trust it. No CA yet (no
// paddock-egress has started) gives no trust: such a Pod has no egress until paddock-egress
// runs, and it trusts the CA from its next Pod on.
func (r *Reconciler) egressCATrust(ctx context.Context, sb *agentsv1beta1.Sandbox) (bool, error) {
	if r.opts.EgressCASecret.Name == "" {
		return false, nil
	}
	annotations := sb.Spec.PodTemplate.ObjectMeta.Annotations
	if _, policed := annotations[egress.PolicyAnnotation]; !policed && annotations[egress.TrustCAAnnotation] != "true" {
		return false, nil
	}
	var src corev1.Secret
	err := r.reader().Get(ctx, r.opts.EgressCASecret, &src)
	if apierrors.IsNotFound(err) || (err == nil && len(src.Data[corev1.TLSCertKey]) == 0) {
		ctrl.LoggerFrom(ctx).Info("The sandbox has an egress policy but the installation has no egress CA yet; its Pod will not trust it (is paddock-egress running?)", "secret", r.opts.EgressCASecret)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the egress CA certificate from secret %s: %w", r.opts.EgressCASecret, err)
	}
	ca := src.Data[corev1.TLSCertKey] // only the certificate: tls.key never leaves paddock-system
	want := map[string][]byte{EgressCAKey: ca, EgressCABundleKey: slices.Concat(PublicRoots(), ca)}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: EgressCAName}
	var got corev1.Secret
	err = r.reader().Get(ctx, key, &got)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{egressCALabel: "true"}},
			Type: corev1.SecretTypeOpaque, Data: want}
		if err := r.create(ctx, s, "egress CA secret "+key.Name); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating secret %s with the egress CA certificate: %w", key, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Created egress CA secret", "secret", klog.KObj(s))
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading secret %s: %w", key, err)
	case got.Labels[egressCALabel] != "true":
		return false, fmt.Errorf("secret %s exists and is not Paddock's (no label %s=true); rename it so the controller can give policed sandboxes the egress CA", key, egressCALabel)
	case bytes.Equal(got.Data[EgressCAKey], want[EgressCAKey]) && bytes.Equal(got.Data[EgressCABundleKey], want[EgressCABundleKey]):
		return true, nil
	}
	got.Data = want
	if err := r.client.Update(ctx, &got, fieldOwner); err != nil {
		return false, fmt.Errorf("updating secret %s with the current egress CA certificate: %w", key, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Updated egress CA secret", "secret", klog.KObj(&got))
	return true, nil
}

// withEgressCA mounts the namespace's egress CA Secret into every regular container of spec and
// sets egressCAEnv, except the variables a container sets itself: its author chose those roots.
func withEgressCA(spec *corev1.PodSpec) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: EgressCAName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: EgressCAName}}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: EgressCAName, MountPath: EgressCADir, ReadOnly: true})
		for _, e := range egressCAEnv {
			if !slices.ContainsFunc(c.Env, func(o corev1.EnvVar) bool { return o.Name == e.Name }) {
				c.Env = append(c.Env, e)
			}
		}
	}
}
