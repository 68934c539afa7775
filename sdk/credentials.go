package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/credentials"
)

// tokenReadTimeout bounds reading a sandbox's credentials Secret.
const tokenReadTimeout = 30 * time.Second

// directToken returns the bearer token for calls straight to the sandbox's daemon:
// Options.Token when set, else the sandbox token the controller put in Secret
// "<sandbox>-credentials" (docs/design/credentials.md), read once per Sandbox. A missing Secret
// means the controller runs without per-Sandbox credentials, and no token is sent. Through the
// router no Secret is read: the router presents the sandbox's token itself. Call with s.mu held.
func (s *Sandbox) directToken() (string, error) {
	if s.c.opts.Token != "" {
		return s.c.opts.Token, nil
	}
	if s.tokenRead {
		return s.token, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenReadTimeout)
	defer cancel()
	name := credentials.SandboxSecretName(s.sandbox)
	secret := &corev1.Secret{}
	err := s.c.kube.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		s.token, s.tokenRead = "", true
		return "", nil
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("reading the token of sandbox %s/%s from Secret %s: %w; grant this user get on secrets in namespace %s (a Role rule with resources [secrets], verbs [get]), go through the router (Options.RouterURL), or set Options.Token",
			s.namespace, s.sandbox, name, err, s.namespace)
	case err != nil:
		return "", fmt.Errorf("reading the token of sandbox %s/%s from Secret %s/%s: %w", s.namespace, s.sandbox, s.namespace, name, err)
	}
	tok := strings.TrimSpace(string(secret.Data[credentials.TokenDataKey]))
	if tok == "" {
		return "", fmt.Errorf("secret %s/%s has no %q: it is not a Paddock credentials Secret; delete it so the controller re-creates it", s.namespace, name, credentials.TokenDataKey)
	}
	s.token, s.tokenRead = tok, true
	return tok, nil
}
