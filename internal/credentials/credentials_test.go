package credentials

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestTokensAreBoundToOneSandbox(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	base := SandboxToken(key, "ns", "sb", "uid-1")
	others := map[string]string{
		"other namespace":  SandboxToken(key, "ns2", "sb", "uid-1"),
		"other name":       SandboxToken(key, "ns", "sb2", "uid-1"),
		"re-created (uid)": SandboxToken(key, "ns", "sb", "uid-2"),
		"fields shifted":   SandboxToken(key, "n", "ssb", "uid-1"),
		"control token":    ControlToken(key, "ns", "sb", "uid-1"),
		"other key":        SandboxToken(bytes.Repeat([]byte{8}, KeySize), "ns", "sb", "uid-1"),
	}
	for what, tok := range others {
		if tok == base {
			t.Errorf("%s: token equals the sandbox token %q", what, base)
		}
	}
	if again := SandboxToken(key, "ns", "sb", types.UID("uid-1")); again != base {
		t.Errorf("derivation is not stable: %q then %q", base, again)
	}
	if strings.ContainsAny(base, "+/= ") || len(base) != 43 {
		t.Errorf("token %q is not 43 characters of unpadded base64url", base)
	}
}

func TestKeyFromSecret(t *testing.T) {
	good := bytes.Repeat([]byte{1}, KeySize)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "paddock-system", Name: KeySecretName},
		Data: map[string][]byte{KeySecretDataKey: good}}
	if got, err := KeyFromSecret(s); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("KeyFromSecret = %v, %v; want the key", got, err)
	}
	s.Data[KeySecretDataKey] = good[:KeySize-1]
	_, err := KeyFromSecret(s)
	if err == nil || !strings.Contains(err.Error(), "paddock-system/"+KeySecretName) || !strings.Contains(err.Error(), "delete the Secret") {
		t.Fatalf("short key: error %v, want one naming the Secret and the fix", err)
	}
}

func TestNewKey(t *testing.T) {
	a, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewKey()
	if len(a) != KeySize || bytes.Equal(a, b) {
		t.Fatalf("NewKey gave %d bytes, equal twice: %v", len(a), bytes.Equal(a, b))
	}
	if SandboxSecretName("sb") != "sb-credentials" {
		t.Fatalf("SandboxSecretName(sb) = %q", SandboxSecretName("sb"))
	}
}
