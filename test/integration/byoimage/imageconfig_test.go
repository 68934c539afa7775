package byoimage

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// privateRegistry serves a registry on loopback that answers only to user:secret, and returns
// its host and a function pushing an image with cfg to repo (NAME:TAG) in it.
func privateRegistry(t *testing.T) (string, func(repo string, cfg image.Config) string) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "user" || pass != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "credentials, please", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	return host, func(repo string, cfg image.Config) string {
		t.Helper()
		img, err := image.FromLayers(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: "user", Password: "secret"})); err != nil {
			t.Fatal(err)
		}
		return tag.String()
	}
}

// pullSecret is the dockerconfigjson Secret "pull" for the registry at host.
func pullSecret(ns, host string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte("user:secret"))
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`)}}
}

// injected is a Sandbox of image asking for sandboxd injection with no command, pulling with the
// Secret "pull" when withSecret.
func injected(name, ns, image string, withSecret bool, args ...string) *agentsv1beta1.Sandbox {
	sb := builder.MakeSandbox(name, ns).Image(image).PodAnnotation(agentsv1beta1.InjectSandboxdAnnotation, "true").Obj()
	sb.Spec.PodTemplate.Spec.Containers[0].Args = args
	if withSecret {
		sb.Spec.PodTemplate.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	}
	return sb
}

// wrapped waits for the Pod of sb and returns its first container's command and args.
func wrapped(t *testing.T, sb *agentsv1beta1.Sandbox) []string {
	t.Helper()
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(sb), pod)
	})
	c := pod.Spec.Containers[0]
	return append(append([]string(nil), c.Command...), c.Args...)
}

// A template that names no command keeps running what its image runs: the controller reads the
// image's entrypoint and cmd from a private registry with the template's imagePullSecrets, and
// the injected sandboxd supervises them (the template's args replace the image's cmd, as without
// sandboxd).
func TestInjectedImageKeepsItsEntrypoint(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	host, push := privateRegistry(t)
	web := push("web:1", image.Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"serve", "--port", "8000"}})
	cmdOnly := push("cmd-only:1", image.Config{Cmd: []string{"python3", "-m", "http.server", "8000"}})
	framework.MustCreate(t, ctx, env.Client, pullSecret(ns, host))

	for _, tc := range []struct {
		sb   *agentsv1beta1.Sandbox
		want []string
	}{
		{injected("entrypoint-and-cmd", ns, web, true), []string{"/docker-entrypoint.sh", "serve", "--port", "8000"}},
		{injected("template-args", ns, web, true, "serve", "--debug"), []string{"/docker-entrypoint.sh", "serve", "--debug"}},
		{injected("cmd-only", ns, cmdOnly, true), []string{"python3", "-m", "http.server", "8000"}},
	} {
		framework.MustCreate(t, ctx, env.Client, tc.sb)
		want := append([]string{blueprint.InjectedSandboxd, "--preflight", "--"}, tc.want...)
		if got := wrapped(t, tc.sb); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sandbox %s: container runs %q, want %q", tc.sb.Name, got, want)
		}
	}
}

// When the image's config cannot be read (no credential for a private registry, an image not
// pushed yet) the Sandbox says so, naming the image, the registry's answer and the fixes, and gets
// no Pod; once the image can be read, the retry creates its Pod.
func TestImageConfigUnreadable(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	host, push := privateRegistry(t)
	web := push("web:1", image.Config{Entrypoint: []string{"/serve"}})
	framework.MustCreate(t, ctx, env.Client, pullSecret(ns, host))

	late := host + "/late:1"
	for _, tc := range []struct {
		sb    *agentsv1beta1.Sandbox
		cause string
	}{
		{injected("no-credential", ns, web, false), "401 Unauthorized"},
		{injected("not-pushed", ns, late, true), "NAME_UNKNOWN"},
	} {
		framework.MustCreate(t, ctx, env.Client, tc.sb)
		got := waitCondition(t, tc.sb, agentsv1beta1.SandboxConditionReady, agentsv1beta1.SandboxReasonImageConfigUnreadable)
		msg := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message
		for _, part := range []string{`container "main" has no command`, tc.sb.Spec.PodTemplate.Spec.Containers[0].Image, tc.cause, "fix: ", "imagePullSecrets", "set the container's command"} {
			if !strings.Contains(msg, part) {
				t.Errorf("sandbox %s: Ready message %q lacks %q", tc.sb.Name, msg, part)
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.sb), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("sandbox %s has a Pod (get: %v) though its image's config is unreadable", tc.sb.Name, err)
		}
	}

	push("late:1", image.Config{Entrypoint: []string{"/late"}, Cmd: []string{"--now"}})
	want := []string{blueprint.InjectedSandboxd, "--preflight", "--", "/late", "--now"}
	if got := wrapped(t, injected("not-pushed", ns, late, true)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("once pushed, the container runs %q, want %q", got, want)
	}
}

// With no imagePullSecrets in the pod template, the service account's are used, as the API
// server's ServiceAccount admission gives them to the Pod; a template that lists its own uses
// those alone, as that admission does.
func TestServiceAccountPullSecrets(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	host, push := privateRegistry(t)
	web := push("web:1", image.Config{Entrypoint: []string{"/serve"}, Cmd: []string{"--port", "8000"}})
	framework.MustCreate(t, ctx, env.Client, pullSecret(ns, host))
	framework.MustCreate(t, ctx, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "puller", Namespace: ns},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}})

	viaSA := injected("via-sa", ns, web, false)
	viaSA.Spec.PodTemplate.Spec.ServiceAccountName = "puller"
	framework.MustCreate(t, ctx, env.Client, viaSA)
	want := []string{blueprint.InjectedSandboxd, "--preflight", "--", "/serve", "--port", "8000"}
	if got := wrapped(t, viaSA); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with the service account's pull secret: the container runs %q, want %q", got, want)
	}

	// In another namespace: what a namespace read is cached for the namespace.
	other := env.Namespace(t)
	framework.MustCreate(t, ctx, env.Client, pullSecret(other, host))
	framework.MustCreate(t, ctx, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "puller", Namespace: other},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}})
	ownList := injected("own-list", other, web, false)
	ownList.Spec.PodTemplate.Spec.ServiceAccountName = "puller"
	ownList.Spec.PodTemplate.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "not-there"}}
	noSA := injected("no-sa", other, web, false)
	noSA.Spec.PodTemplate.Spec.ServiceAccountName = "not-there"
	for _, sb := range []*agentsv1beta1.Sandbox{ownList, noSA} {
		framework.MustCreate(t, ctx, env.Client, sb)
		got := waitCondition(t, sb, agentsv1beta1.SandboxConditionReady, agentsv1beta1.SandboxReasonImageConfigUnreadable)
		if msg := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message; !strings.Contains(msg, "401") {
			t.Errorf("sandbox %s: Ready message %q; want the registry's 401", sb.Name, msg)
		}
	}
}

// flakyRegistry serves a registry on loopback that answers 503 while down is set.
func flakyRegistry(t *testing.T) (host string, down *atomic.Bool, push func(repo string, cfg image.Config) string) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	down = &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	return host, down, func(repo string, cfg image.Config) string {
		t.Helper()
		img, err := image.FromLayers(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tag, err := name.NewTag(host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
		return tag.String()
	}
}

// A registry that does not answer is a blip first (ImageConfigRetrying: no pool or client gives
// up on it) and its Sandbox starts once it answers again; one that keeps refusing connections
// becomes ImageConfigUnreadable, which the pool reports as MembersIncompatible, holding its
// members rather than replacing them.
func TestRegistryBlipAndRegistryThatStaysDown(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)

	host, down, push := flakyRegistry(t)
	web := push("web:1", image.Config{Entrypoint: []string{"/serve"}})
	down.Store(true)
	blip := injected("blip", ns, web, false)
	framework.MustCreate(t, ctx, env.Client, blip)
	got := waitCondition(t, blip, agentsv1beta1.SandboxConditionReady, agentsv1beta1.SandboxReasonImageConfigRetrying)
	if msg := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message; !strings.Contains(msg, "503") || !strings.Contains(msg, host) {
		t.Errorf("Ready message %q; want the registry's 503 and the image", msg)
	}
	if c := got.CannotHostSandboxd(); c != nil {
		t.Errorf("a registry blip counts as the image not fitting: %v", c)
	}
	down.Store(false)
	want := []string{blueprint.InjectedSandboxd, "--preflight", "--", "/serve"}
	if got := wrapped(t, blip); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("once the registry answers, the container runs %q, want %q", got, want)
	}

	// Nothing listens at the closed server's address: every connection is refused.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	gone := strings.TrimPrefix(closed.URL, "http://") + "/web:1"
	framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate("gone", ns).Image(gone).InjectSandboxd().Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("gone", ns, "gone").Replicas(1).Obj())
	pool := &extensionsv1beta1.SandboxWarmPool{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, pool); err != nil {
			return err
		}
		return builder.HasCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse,
			extensionsv1beta1.PoolReasonMembersIncompatible)
	})
	msg := meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing).Message
	for _, part := range []string{gone, "connection refused", "no answer for", "fix: "} {
		if !strings.Contains(msg, part) {
			t.Errorf("pool Progressing message %q lacks %q", msg, part)
		}
	}
	var members agentsv1beta1.SandboxList
	if err := env.Client.List(ctx, &members, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, m := range members.Items {
		if !slices.ContainsFunc(m.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Name == "gone" }) {
			continue
		}
		if err := builder.HasCondition(m.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonImageConfigUnreadable); err != nil {
			t.Errorf("member %s: %v", m.Name, err)
		}
	}
}
