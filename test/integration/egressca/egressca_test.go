// Package egressca proves on a real kube-apiserver, with the controllers as main runs them, that a
// Pod with an egress policy trusts the installation's egress CA by itself (docs/design/egress.md,
// "CA trust"): its containers mount the CA's certificate and a bundle of roots plus it, and the
// variables common clients read point there; the CA's key never reaches the sandbox's
// namespace; a Pod without a policy gets nothing; a rotated CA reaches the next Pod; a Secret of
// that name that is not Paddock's is never overwritten.
package egressca

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/egressproxy"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, framework.StartControllers)
}

const policy = `{"allow":["example.test"],"deny":["0.0.0.0/0"]}`

var caKey = types.NamespacedName{Namespace: manager.DefaultNamespace, Name: sandbox.EgressCAName}

// TestPolicedPodsTrustTheEgressCA runs in order: no CA yet, a CA, a policy-less Pod, one that
// asks for the trust, a rotation.
func TestPolicedPodsTrustTheEgressCA(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)

	// Before any paddock-egress has made the CA, a policed Pod is still created, without trust.
	early := podOf(t, ctx, builder.MakeSandbox("early", ns).PodAnnotation(egress.PolicyAnnotation, policy).Obj())
	wantNoTrust(t, early)

	first := writeCA(t, ctx)
	pod := podOf(t, ctx, builder.MakeSandbox("policed", ns).PodAnnotation(egress.PolicyAnnotation, policy).Obj())
	wantTrust(t, pod)
	wantNamespaceCA(t, ctx, ns, first)

	// A container that chooses its own roots keeps them; the other variables are still set.
	own := builder.MakeSandbox("own-roots", ns).PodAnnotation(egress.PolicyAnnotation, policy).Obj()
	own.Spec.PodTemplate.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SSL_CERT_FILE", Value: "/mine.pem"}}
	ownPod := podOf(t, ctx, own)
	if got := envOf(ownPod.Spec.Containers[0], "SSL_CERT_FILE"); got != "/mine.pem" {
		t.Errorf("SSL_CERT_FILE = %q, want the container's own /mine.pem", got)
	}
	if got := envOf(ownPod.Spec.Containers[0], "REQUESTS_CA_BUNDLE"); got != sandbox.EgressCADir+"/"+sandbox.EgressCABundleKey {
		t.Errorf("REQUESTS_CA_BUNDLE = %q, want the bundle", got)
	}

	wantNoTrust(t, podOf(t, ctx, builder.MakeSandbox("open", ns).Obj()))
	// A template may ask for the trust without a policy (E2B's pools: network.rules give a warm
	// member its policy only at claim time); any other value asks for nothing.
	wantTrust(t, podOf(t, ctx, builder.MakeSandbox("asks", ns).PodAnnotation(egress.TrustCAAnnotation, "true").Obj()))
	wantNoTrust(t, podOf(t, ctx, builder.MakeSandbox("asks-not", ns).PodAnnotation(egress.TrustCAAnnotation, "false").Obj()))

	// Rotation: the next policed Pod's namespace Secret holds the new certificate.
	second := writeCA(t, ctx)
	wantTrust(t, podOf(t, ctx, builder.MakeSandbox("after-rotation", ns).PodAnnotation(egress.PolicyAnnotation, policy).Obj()))
	wantNamespaceCA(t, ctx, ns, second)
}

// TestForeignSecretIsNotOverwritten: a user's Secret of the controller's name in a sandbox's
// namespace stays as it is, and the Sandbox says why it has no Pod.
func TestForeignSecretIsNotOverwritten(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	writeCA(t, ctx)
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sandbox.EgressCAName, Namespace: ns},
		Data: map[string][]byte{sandbox.EgressCAKey: []byte("the user's own")}}
	framework.MustCreate(t, ctx, env.Client, mine)
	sb := builder.MakeSandbox("policed", ns).PodAnnotation(egress.PolicyAnnotation, policy).Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(sb.Status.Conditions, string(agentsv1beta1.SandboxConditionReady))
		if c == nil || !strings.Contains(c.Message, "is not Paddock's") {
			return fmt.Errorf("Ready = %+v, want a message naming the foreign Secret", c)
		}
		return nil
	})
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mine), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data[sandbox.EgressCAKey]) != "the user's own" || len(got.Data) != 1 {
		t.Errorf("the user's Secret was changed: %v", got.Data)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod of the sandbox: %v, want none", err)
	}
}

// writeCA makes a new CA in the installation's CA Secret, as paddock-egress would, and returns it.
func writeCA(t *testing.T, ctx context.Context) *egressproxy.CA {
	t.Helper()
	ca, err := egressproxy.NewCA("egressca test " + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: caKey.Namespace, Name: caKey.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, env.Client, s, func() error {
		s.Type = corev1.SecretTypeTLS
		s.Data = map[string][]byte{corev1.TLSCertKey: ca.CertPEM(), corev1.TLSPrivateKeyKey: ca.KeyPEM()}
		return nil
	}); err != nil {
		t.Fatalf("writing the egress CA Secret: %v", err)
	}
	return ca
}

func podOf(t *testing.T, ctx context.Context, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	t.Helper()
	framework.MustCreate(t, ctx, env.Client, sb)
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(sb), pod)
	})
	return pod
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

var trustEnv = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"}

func wantTrust(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == sandbox.EgressCAName {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != sandbox.EgressCAName {
		t.Fatalf("pod %s: volume %s = %+v, want the namespace's Secret %s", pod.Name, sandbox.EgressCAName, vol, sandbox.EgressCAName)
	}
	for _, c := range pod.Spec.Containers {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.Name == sandbox.EgressCAName && m.MountPath == sandbox.EgressCADir && m.ReadOnly)
		}
		if !mounted {
			t.Errorf("pod %s container %s does not mount the CA read-only at %s: %+v", pod.Name, c.Name, sandbox.EgressCADir, c.VolumeMounts)
		}
		for _, name := range trustEnv {
			if v := envOf(c, name); !strings.HasPrefix(v, sandbox.EgressCADir+"/") && v != "/mine.pem" {
				t.Errorf("pod %s container %s: %s = %q, want a file under %s", pod.Name, c.Name, name, v, sandbox.EgressCADir)
			}
		}
	}
}

func wantNoTrust(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.Name == sandbox.EgressCAName {
			t.Errorf("pod %s has volume %s, want none", pod.Name, v.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, name := range trustEnv {
			if v := envOf(c, name); v != "" {
				t.Errorf("pod %s container %s: %s = %q, want unset", pod.Name, c.Name, name, v)
			}
		}
	}
}

// wantNamespaceCA checks the namespace's Secret: the certificate alone, the controller's roots
// followed by it, and nothing of the key.
func wantNamespaceCA(t *testing.T, ctx context.Context, ns string, ca *egressproxy.CA) {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sandbox.EgressCAName}, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Data) != 2 || !bytes.Equal(s.Data[sandbox.EgressCAKey], ca.CertPEM()) {
		t.Errorf("secret %s/%s: keys %d, %s = %q; want exactly %s and %s, the CA's certificate", ns, s.Name, len(s.Data), sandbox.EgressCAKey, s.Data[sandbox.EgressCAKey], sandbox.EgressCAKey, sandbox.EgressCABundleKey)
	}
	bundle := s.Data[sandbox.EgressCABundleKey]
	if want := slices.Concat(sandbox.PublicRoots(), ca.CertPEM()); !bytes.Equal(bundle, want) {
		t.Errorf("bundle (%d bytes) is not the public roots followed by the CA (%d bytes)", len(bundle), len(want))
	}
	for k, v := range s.Data {
		if bytes.Contains(v, []byte("PRIVATE KEY")) || bytes.Contains(v, bytes.TrimSpace(ca.KeyPEM())) {
			t.Errorf("secret %s/%s key %s holds a private key", ns, s.Name, k)
		}
	}
}

// TestTrustAnnotationGivesOnlyTheCertificate plays a user of another namespace (a namespace
// admin: every verb on Sandboxes, Pods and Secrets there, nothing elsewhere) who sets the trust
// annotation on a Sandbox of their own, and code in that sandbox with the Pod's ServiceAccount
// token. They get the CA's public certificate and the bundle, and neither reaches the CA's key:
// the namespace's copy holds no key, and the installation's Secret is not theirs to read.
func TestTrustAnnotationGivesOnlyTheCertificate(t *testing.T) {
	ctx := framework.Context(t, 2*time.Minute)
	ca := writeCA(t, ctx)
	ns := env.Namespace(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{agentsv1beta1.GroupVersion.Group}, Resources: []string{"sandboxes"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "secrets"}, Verbs: []string{"*"}}}}
	framework.MustCreate(t, ctx, env.Client, role)
	framework.MustCreate(t, ctx, env.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "user", Namespace: ns}}})
	as := func(token string) client.Client {
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = token
		c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	user := as(framework.ServiceAccountToken(t, env.Config, ns, "user"))

	sb := builder.MakeSandbox("asks", ns).PodAnnotation(egress.TrustCAAnnotation, "true").Obj()
	if err := user.Create(ctx, sb); err != nil {
		t.Fatalf("the namespace's user creating a Sandbox that asks for the trust: %v", err)
	}
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error { return user.Get(ctx, client.ObjectKeyFromObject(sb), pod) })
	wantTrust(t, pod)
	copyOf := &corev1.Secret{}
	if err := user.Get(ctx, types.NamespacedName{Namespace: ns, Name: sandbox.EgressCAName}, copyOf); err != nil {
		t.Fatalf("the user reading the namespace's copy: %v", err)
	}
	keys := slices.Sorted(maps.Keys(copyOf.Data))
	if !slices.Equal(keys, []string{sandbox.EgressCABundleKey, sandbox.EgressCAKey}) || !bytes.Equal(copyOf.Data[sandbox.EgressCAKey], ca.CertPEM()) {
		t.Errorf("the namespace's copy has keys %v; want only %s (the CA's certificate) and %s", keys, sandbox.EgressCAKey, sandbox.EgressCABundleKey)
	}
	for k, v := range copyOf.Data {
		if bytes.Contains(v, []byte("PRIVATE KEY")) || bytes.Contains(v, bytes.TrimSpace(ca.KeyPEM())) {
			t.Errorf("the namespace's copy, key %s, holds a private key", k)
		}
	}

	// Neither the user nor the sandbox's own ServiceAccount reads the installation's Secret.
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	// envtest runs no controller that makes a namespace's default ServiceAccount.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	podToken, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]client.Client{"the namespace's user": user, "the sandbox's ServiceAccount " + sa: as(podToken.Status.Token)} {
		if err := c.Get(ctx, caKey, &corev1.Secret{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s reading Secret %s: %v; want forbidden", who, caKey, err)
		}
		if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(caKey.Namespace)); !apierrors.IsForbidden(err) {
			t.Errorf("%s listing the Secrets of %s: %v; want forbidden", who, caKey.Namespace, err)
		}
	}
	if err := as(podToken.Status.Token).Get(ctx, types.NamespacedName{Namespace: ns, Name: sandbox.EgressCAName}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the sandbox's ServiceAccount reading the namespace's copy: %v; want forbidden", err)
	}
}
