// Package credentials is Paddock's credential model for sandboxes (docs/design/credentials.md).
//
// One cluster-wide key, held in a Secret that only the controller creates and only the controller
// and the router read, derives two tokens per Sandbox: the sandbox token, which every client of
// the sandbox's daemon presents, and the control token, which only the controller presents.
// Both are bound to the Sandbox's namespace, name and UID, so a token of one sandbox opens no
// other, and a Sandbox re-created under the same name gets new tokens. The Sandbox controller
// copies both into a per-Sandbox Secret that the sandbox's containers receive as environment
// variables and the claim's holder may read; nothing else needs to be stored.
//
// The package is pure: no client, no context, no logging.
package credentials

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The cluster key's Secret, in the controller's namespace.
const (
	// KeySecretName is the default name of the Secret that holds the key.
	KeySecretName = "paddock-credentials-key"
	// KeySecretDataKey is the data key of the key in that Secret.
	KeySecretDataKey = "key"
	// KeySize is the size of a key in bytes; shorter keys are refused.
	KeySize = 32
)

// The per-Sandbox Secret, in the Sandbox's namespace, owned by the Sandbox.
const (
	// SandboxSecretSuffix makes the Secret's name from the Sandbox's: "<sandbox>-credentials".
	SandboxSecretSuffix = "-credentials"
	// TokenDataKey holds the sandbox token.
	TokenDataKey = "token"
	// ControlTokenDataKey holds the control token.
	ControlTokenDataKey = "control-token"
)

// Purposes separate the two tokens derived from one key and Sandbox.
const (
	purposeSandbox = "paddock.dev/sandbox-token/v1"
	purposeControl = "paddock.dev/control-token/v1"
)

// SandboxSecretName is the name of a Sandbox's credentials Secret.
func SandboxSecretName(sandbox string) string { return sandbox + SandboxSecretSuffix }

// NewKey returns a fresh random key.
func NewKey() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating the credentials key: %w", err)
	}
	return key, nil
}

// KeyFromSecret returns the key a key Secret holds, or an error naming the Secret and the fix.
func KeyFromSecret(s *corev1.Secret) ([]byte, error) {
	key := s.Data[KeySecretDataKey]
	if len(key) < KeySize {
		return nil, fmt.Errorf("secret %s/%s: data key %q holds %d bytes, want at least %d; delete the Secret and the controller creates a new key (every sandbox token changes)",
			s.Namespace, s.Name, KeySecretDataKey, len(key), KeySize)
	}
	return key, nil
}

// SandboxToken is the bearer token of one Sandbox's daemon.
func SandboxToken(key []byte, namespace, name string, uid types.UID) string {
	return derive(key, purposeSandbox, namespace, name, uid)
}

// ControlToken is the token with which the controller configures one Sandbox's daemon.
func ControlToken(key []byte, namespace, name string, uid types.UID) string {
	return derive(key, purposeControl, namespace, name, uid)
}

func derive(key []byte, purpose, namespace, name string, uid types.UID) string {
	mac := hmac.New(sha256.New, key)
	// NUL cannot occur in a namespace, a name or a UID, so the fields cannot run into each other.
	for _, f := range []string{purpose, namespace, name, string(uid)} {
		mac.Write([]byte(f))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
