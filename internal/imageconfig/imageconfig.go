package imageconfig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
)

// ErrUnreadable wraps every failure to read an image's config: the registry is unreachable,
// refuses the credentials, or has no such image for the platform.
var ErrUnreadable = errors.New("cannot read the image's config from its registry")

// Error is a failure to read an image's config; errors.Is(err, ErrUnreadable) holds for it.
type Error struct {
	msg string
	// Lasting is true when waiting will not help as things stand: the registry gave a definite
	// answer (it refused the credentials, has no such image, the reference or a pull secret is
	// malformed), or it has failed to answer (network errors, 5xx, 429) for longer than the
	// Reader's LastsAfter. A registry blip is not lasting: the controller retries.
	Lasting bool
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return ErrUnreadable }

// Lasting reports whether err is a failure to read an image's config that waiting will not fix
// (Error.Lasting).
func Lasting(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Lasting
}

// Process is what an image's config says to run. The container runtime applies the config's
// working directory, user and environment by itself, whatever command the Pod gives.
type Process struct {
	Entrypoint []string
	Cmd        []string
}

// Defaults of Options.
const (
	// DefaultTTL is how long a Reader trusts what it read.
	DefaultTTL = time.Minute
	// DefaultLastsAfter is how long a registry may fail to answer before the failure counts as
	// lasting: longer than a restart of a registry, shorter than a client's create timeout.
	DefaultLastsAfter = 30 * time.Second
)

// Options configure a Reader; zero fields take the defaults.
type Options struct {
	// Transport carries the registry requests; http.DefaultTransport when nil.
	Transport http.RoundTripper
	// TTL is how long what was read is trusted; DefaultTTL when zero.
	TTL time.Duration
	// LastsAfter is how long a registry that does not answer (network errors, 5xx, 429) is
	// retried as a blip before its failure is lasting; DefaultLastsAfter when zero.
	LastsAfter time.Duration
	// Mirrors maps a registry host[:port] that images name to where the Reader reads it instead
	// (manager --image-config-registry-mirror). Empty reads every image where it names.
	Mirrors Mirrors
	// Now tells the time; time.Now when nil.
	Now func() time.Time
}

// Reader reads image configs. Its zero value is not usable: build it with NewReader.
type Reader struct {
	platform   v1.Platform
	ttl        time.Duration
	lastsAfter time.Duration
	transport  http.RoundTripper
	mirrors    Mirrors
	now        func() time.Time

	mu    sync.Mutex
	cache map[string]cached
	// failing is when each namespace and image started failing to answer, until it answers.
	failing map[string]time.Time
}

type cached struct {
	p       Process
	expires time.Time
}

// maxRemembered bounds each of the Reader's maps: past it, entries that no longer count are
// dropped (whoever may create a Sandbox chooses the images, and so the keys).
const maxRemembered = 4096

// NewReader reads configs for linux on the controller's architecture.
func NewReader(o Options) *Reader {
	r := &Reader{platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, ttl: o.TTL, lastsAfter: o.LastsAfter,
		transport: o.Transport, mirrors: o.Mirrors, now: o.Now, cache: map[string]cached{}, failing: map[string]time.Time{}}
	if r.transport == nil {
		r.transport = http.DefaultTransport
	}
	if r.ttl == 0 {
		r.ttl = DefaultTTL
	}
	if r.lastsAfter == 0 {
		r.lastsAfter = DefaultLastsAfter
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// Read returns what image runs, as seen from namespace with pullSecrets (the Pod's
// imagePullSecrets, already read; secrets of other types are ignored as the kubelet ignores
// them). A registry on localhost or a private address is spoken to over plain HTTP, as the
// go-containerregistry client does for such hosts. A failure is an *Error.
func (r *Reader) Read(ctx context.Context, namespace, image string, pullSecrets []corev1.Secret) (Process, error) {
	key := namespace + "\x00" + image
	now := r.now()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.p, nil
	}
	p, err := r.read(ctx, image, pullSecrets)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.cache, key)
		if !err.Lasting {
			since, seen := r.failing[key]
			if !seen {
				since = now
				r.remember(func() { r.failing[key] = now })
			}
			err.Lasting = now.Sub(since) >= r.lastsAfter
			if err.Lasting {
				err.msg += fmt.Sprintf(" (no answer for %s)", now.Sub(since).Round(time.Second))
			}
		}
		return Process{}, err
	}
	delete(r.failing, key)
	r.remember(func() { r.cache[key] = cached{p: p, expires: now.Add(r.ttl)} })
	return p, nil
}

// remember runs add, first dropping what no longer counts when the maps are full. r.mu is held.
func (r *Reader) remember(add func()) {
	if len(r.cache)+len(r.failing) >= maxRemembered {
		now := r.now()
		for k, c := range r.cache {
			if !now.Before(c.expires) {
				delete(r.cache, k)
			}
		}
		for k, since := range r.failing {
			if now.Sub(since) >= 10*r.lastsAfter {
				delete(r.failing, k)
			}
		}
	}
	add()
}

// read asks the registry, or its mirror, for image's config. The error says whether it is
// definite (Lasting) or whether the registry did not answer.
func (r *Reader) read(ctx context.Context, image string, pullSecrets []corev1.Secret) (Process, *Error) {
	fail := func(lasting bool, format string, args ...any) (Process, *Error) {
		return Process{}, &Error{msg: ErrUnreadable.Error() + ": " + fmt.Sprintf(format, args...), Lasting: lasting}
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return fail(true, "image %q is not an image reference: %v", image, err)
	}
	keys, err := keychainOf(pullSecrets)
	if err != nil {
		return fail(true, "image %q: %v", image, err)
	}
	// Credentials go with the registry the image names, wherever it is read from: the node would
	// send them there.
	auth, err := keys.Resolve(ref.Context())
	if err != nil {
		return fail(true, "image %q: %v", image, err)
	}
	at := ""
	if m, ok := r.mirrors[normalizeRegistry(ref.Context().RegistryStr())]; ok {
		if ref, err = m.reference(ref); err != nil {
			return fail(true, "image %q: its registry's mirror: %v", image, err)
		}
		at = " (read from its mirror " + m.String() + ")"
		if m.Auth != nil {
			auth = authn.FromConfig(*m.Auth)
		}
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(r.platform),
		remote.WithTransport(r.transport), remote.WithAuth(auth), remote.WithRetryBackoff(retry))
	if err != nil {
		return fail(definite(err), "image %q%s: %s", image, at, describe(err))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return fail(definite(err), "image %q%s: %s", image, at, describe(err))
	}
	return Process{Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd}, nil
}

// retry is the client's own retry of a registry's silence: one more try, soon. The controller
// retries a failed read with its back-off, without holding a worker meanwhile.
var retry = remote.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 2}

// definite reports whether err is the registry's answer rather than its silence: any status but
// a server error, 408 or 429 is, and so is what it served (a manifest without the platform, a
// malformed one). A network error, a timeout or a cancelled request is not.
func definite(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode < 500 && te.StatusCode != http.StatusTooManyRequests && te.StatusCode != http.StatusRequestTimeout
	}
	var ue *url.Error
	var ne net.Error
	return !errors.As(err, &ue) && !errors.As(err, &ne) && !errors.Is(err, io.ErrUnexpectedEOF) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, syscall.ECONNREFUSED)
}

// describe is err as the Sandbox's condition may show it: a registry's answer is its status and
// its error codes, never its body. Anyone who may create a Sandbox chooses the image reference,
// and so the host the controller sends a GET to; the body of whatever answers there (a service
// on the controller's network that is no registry) must not come back in the status.
func describe(err error) string {
	var te *transport.Error
	if !errors.As(err, &te) {
		return err.Error()
	}
	msg := fmt.Sprintf("the registry answered %d %s", te.StatusCode, http.StatusText(te.StatusCode))
	var codes []string
	for _, d := range te.Errors {
		if code := string(d.Code); registryCode.MatchString(code) {
			codes = append(codes, code)
		}
	}
	if len(codes) > 0 {
		msg += " (" + strings.Join(codes, ", ") + ")"
	}
	return msg
}

// registryCode is the form of the OCI distribution spec's error codes, such as NAME_UNKNOWN.
var registryCode = regexp.MustCompile(`^[A-Z_]{1,40}$`)

// keychain answers with the credentials a docker config gives the registry, anonymous otherwise.
type keychain map[string]authn.AuthConfig

func (k keychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if cfg, ok := k[normalizeRegistry(res.RegistryStr())]; ok {
		return authn.FromConfig(cfg), nil
	}
	return authn.Anonymous, nil
}

// dockerAuth is one registry's entry of a docker config.
type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// keychainOf reads the registries' credentials from kubernetes.io/dockerconfigjson and
// kubernetes.io/dockercfg Secrets; the first Secret naming a registry wins, as for the kubelet.
func keychainOf(secrets []corev1.Secret) (keychain, error) {
	k := keychain{}
	for _, s := range secrets {
		var auths map[string]dockerAuth
		switch s.Type {
		case corev1.SecretTypeDockerConfigJson:
			var cfg struct {
				Auths map[string]dockerAuth `json:"auths"`
			}
			if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, fmt.Errorf("imagePullSecret %q: %s is not a docker config: %v", s.Name, corev1.DockerConfigJsonKey, err)
			}
			auths = cfg.Auths
		case corev1.SecretTypeDockercfg:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &auths); err != nil {
				return nil, fmt.Errorf("imagePullSecret %q: %s is not a docker config: %v", s.Name, corev1.DockerConfigKey, err)
			}
		default:
			continue
		}
		for host, a := range auths {
			cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}
			if a.Auth != "" && cfg.Username == "" {
				raw, err := base64.StdEncoding.DecodeString(a.Auth)
				user, pass, found := strings.Cut(string(raw), ":")
				if err != nil || !found {
					return nil, fmt.Errorf("imagePullSecret %q: the auth of %s is not base64 of user:password", s.Name, host)
				}
				cfg.Username, cfg.Password = user, pass
			}
			if _, seen := k[normalizeRegistry(host)]; !seen {
				k[normalizeRegistry(host)] = cfg
			}
		}
	}
	return k, nil
}

// normalizeRegistry is a docker config key or a registry name as a bare host[:port], Docker Hub's
// aliases as one.
func normalizeRegistry(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	switch s {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return name.DefaultRegistry
	}
	return s
}
