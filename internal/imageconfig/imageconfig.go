package imageconfig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
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

// Process is what an image's config says to run. The container runtime applies the config's
// working directory, user and environment by itself, whatever command the Pod gives.
type Process struct {
	Entrypoint []string
	Cmd        []string
}

// DefaultTTL is how long a Reader trusts what it read.
const DefaultTTL = time.Minute

// Reader reads image configs. Its zero value is not usable: build it with NewReader.
type Reader struct {
	platform  v1.Platform
	ttl       time.Duration
	transport http.RoundTripper
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	p       Process
	expires time.Time
}

// NewReader reads configs for linux on the controller's architecture through transport
// (http.DefaultTransport when nil), trusting each for ttl (DefaultTTL when zero).
func NewReader(transport http.RoundTripper, ttl time.Duration) *Reader {
	if transport == nil {
		transport = http.DefaultTransport
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return &Reader{platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, ttl: ttl, transport: transport,
		now: time.Now, cache: map[string]cached{}}
}

// Read returns what image runs, as seen from namespace with pullSecrets (the Pod's
// imagePullSecrets, already read; secrets of other types are ignored as the kubelet ignores
// them). A registry on localhost or a private address is spoken to over plain HTTP, as the
// go-containerregistry client does for such hosts.
func (r *Reader) Read(ctx context.Context, namespace, image string, pullSecrets []corev1.Secret) (Process, error) {
	key := namespace + "\x00" + image
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && r.now().Before(c.expires) {
		return c.p, nil
	}
	ref, err := name.ParseReference(image)
	if err != nil {
		return Process{}, fmt.Errorf("%w: image %q is not an image reference: %v", ErrUnreadable, image, err)
	}
	keys, err := keychainOf(pullSecrets)
	if err != nil {
		return Process{}, fmt.Errorf("%w: image %q: %v", ErrUnreadable, image, err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(r.platform),
		remote.WithTransport(r.transport), remote.WithAuthFromKeychain(keys))
	if err != nil {
		return Process{}, fmt.Errorf("%w: image %q: %s", ErrUnreadable, image, describe(err))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Process{}, fmt.Errorf("%w: image %q: %s", ErrUnreadable, image, describe(err))
	}
	p := Process{Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd}
	r.mu.Lock()
	r.cache[key] = cached{p: p, expires: r.now().Add(r.ttl)}
	r.mu.Unlock()
	return p, nil
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
