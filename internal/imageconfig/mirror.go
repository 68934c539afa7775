package imageconfig

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// Mirror is where a registry's images are read from instead of the host the images name: the
// local cluster's registry, which the nodes pull from at 127.0.0.1:5001 but the controller's Pod
// reaches at the node's address.
type Mirror struct {
	// Insecure reads over plain HTTP.
	Insecure bool
	// Host is host[:port].
	Host string
	// Auth, when set, is what the mirror is sent instead of the credentials the Pod's pull
	// secrets give the registry the image names (WithCredentials).
	Auth *authn.AuthConfig
}

func (m Mirror) String() string {
	if m.Insecure {
		return "http://" + m.Host
	}
	return "https://" + m.Host
}

// reference is ref with its registry replaced by the mirror's.
func (m Mirror) reference(ref name.Reference) (name.Reference, error) {
	opts := []name.Option{name.StrictValidation}
	if m.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo := m.Host + "/" + ref.Context().RepositoryStr()
	if d, ok := ref.(name.Digest); ok {
		return name.NewDigest(repo+"@"+d.DigestStr(), opts...)
	}
	return name.NewTag(repo+":"+ref.Identifier(), opts...)
}

// Mirrors maps the registry host[:port] images name to its mirror.
type Mirrors map[string]Mirror

// ParseMirror reads one mapping REGISTRY=URL, such as 127.0.0.1:5001=http://198.18.255.1:5001:
// REGISTRY is a host[:port] as images name it, URL http:// or https:// and a host[:port], with
// no path.
func ParseMirror(s string) (registry string, m Mirror, err error) {
	registry, target, found := strings.Cut(s, "=")
	if !found || registry == "" || target == "" {
		return "", Mirror{}, fmt.Errorf("%q is not REGISTRY=URL; write it as, for example, 127.0.0.1:5001=http://198.18.255.1:5001", s)
	}
	if _, err := name.NewRegistry(registry, name.StrictValidation); err != nil || strings.Contains(registry, "/") {
		return "", Mirror{}, fmt.Errorf("%q: the registry %q is not a host[:port] as images name it (no scheme, no path)", s, registry)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", Mirror{}, fmt.Errorf("%q: the mirror %q is not http://HOST[:PORT] or https://HOST[:PORT] with no path", s, target)
	}
	if _, err := name.NewRegistry(u.Host, name.StrictValidation); err != nil {
		return "", Mirror{}, fmt.Errorf("%q: the mirror's host %q: %v", s, u.Host, err)
	}
	return normalizeRegistry(registry), Mirror{Insecure: u.Scheme == "http", Host: u.Host}, nil
}

// String is the mappings as ParseMirror reads them, comma-separated, in order of registry.
func (ms Mirrors) String() string {
	var out []string
	for reg, m := range ms {
		out = append(out, reg+"="+m.String())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// WithCredentials gives each mirror the credentials a docker config (the content of a
// kubernetes.io/dockerconfigjson Secret) has for its host. The mirror is then sent those, not the
// Pod's, so anyone who may create a Sandbox can have the controller read what any image there
// runs: give credentials only to a mirror of a registry the nodes pull from without any (the
// local cluster's). A mirror the config does not name keeps the Pod's.
func (ms Mirrors) WithCredentials(dockerConfigJSON []byte) error {
	k, err := keychainOf([]corev1.Secret{{Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON}}})
	if err != nil {
		return err
	}
	for reg, m := range ms {
		if a, ok := k[normalizeRegistry(m.Host)]; ok {
			m.Auth = &a
			ms[reg] = m
		}
	}
	return nil
}
