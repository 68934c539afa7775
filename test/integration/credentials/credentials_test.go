// Package credentials proves, against a real kube-apiserver, the control plane's side of the
// credential model (docs/design/credentials.md): the controller creates the installation's key,
// gives every Sandbox a credentials Secret before its Pod, hands the tokens to every container by
// reference, re-creates a deleted Secret, and derives the same tokens after a restart.
package credentials

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

// TestMain starts only the API server: each test runs its own manager, so that one of them can
// restart it.
func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env)
}

var keyName = types.NamespacedName{Namespace: manager.DefaultNamespace, Name: credentials.KeySecretName}

// startControllers runs the controllers as main does until stop is called or the test ends.
func startControllers(t *testing.T) (stop func()) {
	t.Helper()
	stopMgr, err := framework.StartControllers(env)
	if err != nil {
		t.Fatalf("starting the controllers: %v", err)
	}
	once := false
	stop = func() {
		if !once {
			once = true
			stopMgr()
		}
	}
	t.Cleanup(stop)
	return stop
}

func clusterKey(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyName, s); err != nil {
		t.Fatalf("reading the key Secret %s: %v", keyName, err)
	}
	key, err := credentials.KeyFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// wantCredentials waits for sb's credentials Secret to hold the tokens derived from key for sb's
// UID and to be controlled by sb, and returns it.
func wantCredentials(t *testing.T, sb *agentsv1beta1.Sandbox, key []byte) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: credentials.SandboxSecretName(sb.Name)}, secret); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(secret); ref == nil || ref.UID != sb.UID {
			return fmt.Errorf("secret controlled by %v, want sandbox uid %s", ref, sb.UID)
		}
		for dataKey, want := range map[string]string{
			credentials.TokenDataKey:        credentials.SandboxToken(key, sb.Namespace, sb.Name, sb.UID),
			credentials.ControlTokenDataKey: credentials.ControlToken(key, sb.Namespace, sb.Name, sb.UID),
		} {
			if got := string(secret.Data[dataKey]); got != want {
				return fmt.Errorf("data %q = %q, want the token derived for this Sandbox %q", dataKey, got, want)
			}
		}
		return nil
	})
	return secret
}

// wantPodWithTokenRefs waits for sb's Pod and checks that every container gets both tokens from
// the credentials Secret, and no other value for those names.
func wantPodWithTokenRefs(t *testing.T, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(sb), pod)
	})
	secret := credentials.SandboxSecretName(sb.Name)
	for _, c := range pod.Spec.Containers {
		refs := map[string]string{}
		for _, e := range c.Env {
			if e.Name != sandboxd.TokenEnv && e.Name != sandboxd.ControlTokenEnv {
				continue
			}
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret {
				t.Errorf("container %q: %s = %+v, want only a secretKeyRef to %q", c.Name, e.Name, e, secret)
				continue
			}
			if _, dup := refs[e.Name]; dup {
				t.Errorf("container %q sets %s twice", c.Name, e.Name)
			}
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Key
		}
		want := map[string]string{sandboxd.TokenEnv: credentials.TokenDataKey, sandboxd.ControlTokenEnv: credentials.ControlTokenDataKey}
		for name, key := range want {
			if refs[name] != key {
				t.Errorf("container %q: %s refers to key %q, want %q (env %+v)", c.Name, name, refs[name], key, c.Env)
			}
		}
	}
}

func createSandbox(ctx context.Context, t *testing.T, sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	t.Helper()
	if err := env.Client.Create(ctx, sb); err != nil {
		t.Fatalf("creating sandbox: %v", err)
	}
	return sb
}

func TestKeySecretIsCreatedAtStartAndKeptAcrossRestarts(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyName.Namespace, Name: keyName.Name}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	stop := startControllers(t)
	key := clusterKey(ctx, t)
	if len(key) != credentials.KeySize {
		t.Fatalf("key of %d bytes, want %d", len(key), credentials.KeySize)
	}

	ns := env.Namespace(t)
	// A second container, as a sidecar or a non-sandboxd image has, gets the tokens too, and a
	// template's own SANDBOXD_TOKEN is replaced.
	spec := builder.PodTemplate(builder.DefaultImage).Spec
	spec.Containers[0].Env = []corev1.EnvVar{{Name: sandboxd.TokenEnv, Value: "chosen-by-the-template"}, {Name: "KEEP", Value: "1"}}
	spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: builder.DefaultImage})
	sb := createSandbox(ctx, t, builder.MakeSandbox("sb", ns).PodSpec(spec).Obj())
	before := wantCredentials(t, sb, key)
	wantPodWithTokenRefs(t, sb)

	// A restart reads the key instead of minting one, so every token stays what it was; the
	// re-created Secret proves the new process derived them.
	stop()
	if err := env.Client.Delete(ctx, before); err != nil {
		t.Fatal(err)
	}
	startControllers(t)
	if again := clusterKey(ctx, t); !bytes.Equal(again, key) {
		t.Fatal("the key changed across a restart")
	}
	after := wantCredentials(t, sb, key)
	if after.UID == before.UID {
		t.Fatal("the Secret was not re-created")
	}
}

func TestCredentialsSecretComesBeforeThePodAndIsRecreated(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	startControllers(t)
	key := clusterKey(ctx, t)
	ns := env.Namespace(t)

	// A Secret of that name that is not the Sandbox's blocks its credentials: the controller must
	// report it and must not start a Pod without tokens.
	squatter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credentials.SandboxSecretName("sb")},
		Data: map[string][]byte{credentials.TokenDataKey: []byte("known-to-an-attacker")}}
	if err := env.Client.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	sb := createSandbox(ctx, t, builder.MakeSandbox("sb", ns).Obj())
	framework.Eventually(t, func(ctx context.Context) error {
		got := &agentsv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady)
		if ready == nil || ready.Reason != agentsv1beta1.SandboxReasonReconcilerError || !strings.Contains(ready.Message, squatter.Name) {
			return fmt.Errorf("Ready is %+v, want %s naming Secret %q", ready, agentsv1beta1.SandboxReasonReconcilerError, squatter.Name)
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod of a sandbox without credentials: get returned %v, want NotFound", err)
	}

	if err := env.Client.Delete(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	first := wantCredentials(t, sb, key)
	wantPodWithTokenRefs(t, sb)

	// Deleted while the Sandbox runs (a container restart would need it): re-created.
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		got := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), got); err != nil {
			return err
		}
		if got.UID == first.UID {
			return fmt.Errorf("still the deleted Secret")
		}
		return nil
	})
	wantCredentials(t, sb, key)
}

func TestRecreatedSandboxGetsNewTokens(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	startControllers(t)
	key := clusterKey(ctx, t)
	ns := env.Namespace(t)
	old := createSandbox(ctx, t, builder.MakeSandbox("sb", ns).Obj())
	oldSecret := wantCredentials(t, old, key)

	// envtest runs no garbage collector: the old Secret stays, owned by the deleted Sandbox, as it
	// may for a while on a real cluster. The new Sandbox of the same name takes it over.
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), &agentsv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("old sandbox still there: %v", err)
		}
		return nil
	})
	fresh := createSandbox(ctx, t, builder.MakeSandbox("sb", ns).Obj())
	got := wantCredentials(t, fresh, key)
	if bytes.Equal(got.Data[credentials.TokenDataKey], oldSecret.Data[credentials.TokenDataKey]) {
		t.Fatal("a re-created Sandbox kept its predecessor's token")
	}
}

// TestUnauthenticatedNetworkReachesEveryContainer is the migration profile's controller
// (--sandboxd-allow-unauthenticated-network): every container gets
// SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK=true with its tokens, in place of the template's value.
func TestUnauthenticatedNetworkReachesEveryContainer(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	stop, err := framework.StartControllersWith(env, func(o *manager.Options) { o.SandboxdAllowUnauthenticatedNetwork = true }, noop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ns := env.Namespace(t)
	spec := builder.PodTemplate(builder.DefaultImage).Spec
	spec.Containers[0].Env = []corev1.EnvVar{{Name: sandboxd.AllowUnauthenticatedNetworkEnv, Value: "false"}}
	spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: builder.DefaultImage})
	sb := createSandbox(ctx, t, builder.MakeSandbox("sb", ns).PodSpec(spec).Obj())
	wantPodWithTokenRefs(t, sb)
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		var values []string
		for _, e := range c.Env {
			if e.Name == sandboxd.AllowUnauthenticatedNetworkEnv {
				values = append(values, e.Value)
			}
		}
		if len(values) != 1 || values[0] != "true" {
			t.Errorf("container %q: %s = %v, want exactly true", c.Name, sandboxd.AllowUnauthenticatedNetworkEnv, values)
		}
	}
}
