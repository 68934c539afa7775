package imageconfig

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/internal/image"
)

// privateRegistry is a registry on loopback that answers only to user:secret, counting the
// manifest requests it serves.
func privateRegistry(t *testing.T) (host string, manifests *atomic.Int32) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	manifests = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "user" || pass != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if strings.Contains(r.URL.Path, "/manifests/") && r.Method == http.MethodGet {
			manifests.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), manifests
}

func push(t *testing.T, host, repo string, cfg image.Config) string {
	t.Helper()
	img, err := image.FromLayers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + repo
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: "user", Password: "secret"})); err != nil {
		t.Fatal(err)
	}
	return ref
}

func pullSecret(name, host, user, pass string, legacy bool) corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	if legacy {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"http://` + host + `/v1/":{"auth":"` + auth + `"}}`)}}
	}
	return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`)}}
}

func TestReadWithPullSecrets(t *testing.T) {
	host, manifests := privateRegistry(t)
	web := push(t, host, "web:1", image.Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}})
	r := NewReader(Options{TTL: time.Minute})
	ctx := context.Background()

	// No credential, and credentials for another registry or with the wrong password: refused.
	for name, secrets := range map[string][]corev1.Secret{
		"none":           nil,
		"other registry": {pullSecret("other", "registry.example", "user", "secret", false)},
		"wrong password": {pullSecret("wrong", host, "user", "guess", false)},
	} {
		_, err := r.Read(ctx, "ns", web, secrets)
		if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), web) || !strings.Contains(err.Error(), "401") {
			t.Errorf("with %s: err = %v; want ErrUnreadable naming the image and the registry's 401", name, err)
		}
	}
	// A Secret of another type is skipped; the dockerconfigjson one is used, and so is the legacy
	// dockercfg one in another namespace.
	opaque := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opaque"}, Data: map[string][]byte{"password": []byte("secret")}}
	for ns, secret := range map[string]corev1.Secret{"ns": pullSecret("pull", host, "user", "secret", false), "legacy": pullSecret("pull", host, "user", "secret", true)} {
		got, err := r.Read(ctx, ns, web, []corev1.Secret{opaque, secret})
		if err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
		want := Process{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("namespace %s: process (-want +got):\n%s", ns, diff)
		}
	}
	// Cached per namespace and image: another namespace without the credentials does not get
	// what one with them read.
	if _, err := r.Read(ctx, "other", web, nil); !errors.Is(err, ErrUnreadable) {
		t.Errorf("a read from a namespace without credentials = %v; want the registry's refusal, not the other namespace's cache", err)
	}
	// Cached until the TTL ends.
	before := manifests.Load()
	if _, err := r.Read(ctx, "ns", web, nil); err != nil {
		t.Fatalf("a cached read: %v", err)
	}
	if n := manifests.Load() - before; n != 0 {
		t.Errorf("a cached read asked the registry %d times", n)
	}
	r.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := r.Read(ctx, "ns", web, nil); !errors.Is(err, ErrUnreadable) {
		t.Errorf("a read after the TTL without credentials = %v; want the registry asked again, and refusing", err)
	}
}

func TestReadFailures(t *testing.T) {
	host, _ := privateRegistry(t)
	secret := []corev1.Secret{pullSecret("pull", host, "user", "secret", false)}
	r := NewReader(Options{})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		image, want string
		secrets     []corev1.Secret
	}{
		{host + "/missing:1", "NAME_UNKNOWN", secret},
		{"Not An Image", "not an image reference", nil},
		{strings.TrimPrefix(closed.URL, "http://") + "/web:1", "connection refused", nil},
		{host + "/web:1", `imagePullSecret "bad": the auth of ` + host + " is not base64 of user:password",
			[]corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"auth":"bm9jb2xvbg=="}}}`)}}}},
	} {
		_, err := r.Read(context.Background(), "ns", tc.image, tc.secrets)
		if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q) = %v; want ErrUnreadable saying %q", tc.image, err, tc.want)
		}
	}
}

// Whoever creates a Sandbox chooses the host the controller sends a GET to: whatever answers
// there that is no registry, its body never reaches the error (and so the Sandbox's status).
func TestReadShowsNoBodyOfWhatAnswers(t *testing.T) {
	for _, body := range []string{"internal-secret-data", `{"errors":[{"code":"internal-secret-data","message":"internal-secret-data"}]}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(body))
		}))
		_, err := NewReader(Options{}).Read(context.Background(), "ns", strings.TrimPrefix(srv.URL, "http://")+"/web:1", nil)
		srv.Close()
		if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "the registry answered 403 Forbidden") || strings.Contains(err.Error(), "secret") {
			t.Errorf("a server answering %s: err = %v; want its status and nothing of its body", body, err)
		}
	}
}

func TestNormalizeRegistry(t *testing.T) {
	for in, want := range map[string]string{
		"https://index.docker.io/v1/": "index.docker.io", "docker.io": "index.docker.io", "registry-1.docker.io": "index.docker.io",
		"ghcr.io": "ghcr.io", "http://127.0.0.1:5001/v1/": "127.0.0.1:5001",
	} {
		if got := normalizeRegistry(in); got != want {
			t.Errorf("normalizeRegistry(%q) = %q, want %q", in, got, want)
		}
	}
}

// A registry's definite answer is lasting at once; its silence (a closed port, a server error)
// is a blip until it lasts LastsAfter, and an answer ends it.
func TestLasting(t *testing.T) {
	host, _ := privateRegistry(t)
	web := push(t, host, "web:1", image.Config{Entrypoint: []string{"/serve"}})
	secret := []corev1.Secret{pullSecret("pull", host, "user", "secret", false)}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	var down atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		// The private registry behind, with its credentials.
		r.SetBasicAuth("user", "secret")
		r.URL.Scheme, r.URL.Host, r.RequestURI = "http", host, ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(flaky.Close)
	flakyWeb := strings.TrimPrefix(flaky.URL, "http://") + "/web:1"

	now := time.Now()
	r := NewReader(Options{LastsAfter: 30 * time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()
	for _, tc := range []struct {
		image   string
		secrets []corev1.Secret
		lasting bool
	}{
		{web, nil, true},                    // 401
		{host + "/missing:1", secret, true}, // NAME_UNKNOWN
		{"Not An Image", nil, true},
		{strings.TrimPrefix(closed.URL, "http://") + "/web:1", nil, false},
	} {
		_, err := r.Read(ctx, "ns", tc.image, tc.secrets)
		if !errors.Is(err, ErrUnreadable) || Lasting(err) != tc.lasting {
			t.Errorf("Read(%q) = %v, lasting %v; want ErrUnreadable, lasting %v", tc.image, err, Lasting(err), tc.lasting)
		}
	}

	down.Store(true)
	for _, step := range []struct {
		after   time.Duration
		lasting bool
	}{{0, false}, {29 * time.Second, false}, {30 * time.Second, true}} {
		now = now.Add(step.after)
		_, err := r.Read(ctx, "ns", flakyWeb, nil)
		if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "503") || Lasting(err) != step.lasting {
			t.Fatalf("a 503 after %s more: %v, lasting %v; want lasting %v", step.after, err, Lasting(err), step.lasting)
		}
	}
	if _, err := r.Read(ctx, "other", flakyWeb, nil); Lasting(err) {
		t.Errorf("another namespace's first failure is lasting: %v", err)
	}
	down.Store(false)
	if p, err := r.Read(ctx, "ns", flakyWeb, nil); err != nil || p.Entrypoint[0] != "/serve" {
		t.Fatalf("once the registry answers: %v, %v", p, err)
	}
	down.Store(true)
	now = now.Add(2 * time.Minute) // past the TTL: asked again
	if _, err := r.Read(ctx, "ns", flakyWeb, nil); err == nil || Lasting(err) {
		t.Errorf("a new failure after an answer = %v, lasting %v; want a blip again", err, Lasting(err))
	}
}

// A mirror is read instead of the registry the image names, with that registry's credentials.
func TestReadFromMirror(t *testing.T) {
	host, manifests := privateRegistry(t)
	push(t, host, "team/web:1", image.Config{Entrypoint: []string{"/serve"}, Cmd: []string{"--port", "8000"}})
	_, m, err := ParseMirror("registry.invalid:5001=http://" + host)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(Options{Mirrors: Mirrors{"registry.invalid:5001": m}})
	got, err := r.Read(context.Background(), "ns", "registry.invalid:5001/team/web:1",
		[]corev1.Secret{pullSecret("pull", "registry.invalid:5001", "user", "secret", false)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Process{Entrypoint: []string{"/serve"}, Cmd: []string{"--port", "8000"}}, got); diff != "" {
		t.Errorf("process (-want +got):\n%s", diff)
	}
	if manifests.Load() == 0 {
		t.Error("the mirror served no manifest")
	}
	// Without the image's registry's credentials the mirror refuses, and the error names it.
	_, err = r.Read(context.Background(), "other", "registry.invalid:5001/team/web:1", nil)
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "mirror http://"+host) {
		t.Errorf("without credentials: %v; want the mirror's 401, naming the mirror", err)
	}
	// With credentials of its own, the mirror is sent those, whatever the Pod's.
	ms := Mirrors{"registry.invalid:5001": m}
	own := pullSecret("", host, "user", "secret", false).Data[corev1.DockerConfigJsonKey]
	if err := ms.WithCredentials(own); err != nil || ms["registry.invalid:5001"].Auth == nil {
		t.Fatalf("WithCredentials: %v, %+v", err, ms)
	}
	for _, secrets := range [][]corev1.Secret{nil, {pullSecret("pull", "registry.invalid:5001", "user", "guess", false)}} {
		if _, err := NewReader(Options{Mirrors: ms}).Read(context.Background(), "ns", "registry.invalid:5001/team/web:1", secrets); err != nil {
			t.Errorf("a mirror with credentials, pull secrets %v: %v", secrets, err)
		}
	}
	if err := (Mirrors{}).WithCredentials([]byte("{")); err == nil {
		t.Error("WithCredentials of a broken docker config: no error")
	}
	// Other registries are read where they are.
	if _, err := r.Read(context.Background(), "ns", host+"/team/web:1", []corev1.Secret{pullSecret("pull", host, "user", "secret", false)}); err != nil {
		t.Errorf("an image of another registry: %v", err)
	}
}

func TestParseMirror(t *testing.T) {
	for _, tc := range []struct {
		in, registry string
		want         Mirror
		err          string
	}{
		{in: "127.0.0.1:5001=http://198.18.255.1:5001", registry: "127.0.0.1:5001", want: Mirror{Insecure: true, Host: "198.18.255.1:5001"}},
		{in: "docker.io=https://mirror.test", registry: "index.docker.io", want: Mirror{Host: "mirror.test"}},
		{in: "127.0.0.1:5001", err: "not REGISTRY=URL"},
		{in: "http://127.0.0.1:5001=http://198.18.255.1:5001", err: "not a host[:port]"},
		{in: "127.0.0.1:5001=198.18.255.1:5001", err: "not http://HOST[:PORT]"},
		{in: "127.0.0.1:5001=http://198.18.255.1:5001/v2", err: "with no path"},
		{in: "127.0.0.1:5001=ftp://198.18.255.1", err: "not http://HOST[:PORT]"},
	} {
		reg, m, err := ParseMirror(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseMirror(%q) = %v; want an error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || reg != tc.registry || m != tc.want {
			t.Errorf("ParseMirror(%q) = %q, %+v, %v; want %q, %+v", tc.in, reg, m, err, tc.registry, tc.want)
		}
	}
}
