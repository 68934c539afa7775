package sandboxtoken

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/internal/credentials"
)

// The cache of a per-namespace router keeps the sandbox token and never the control token.
func TestKeepSandboxTokenDropsTheControlToken(t *testing.T) {
	in := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "a-credentials", Namespace: "team", UID: "s1", ResourceVersion: "7",
			Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Sandbox", Name: "a", UID: "u1"}}},
		Data: map[string][]byte{credentials.TokenDataKey: []byte("t"), credentials.ControlTokenDataKey: []byte("c"), "other": []byte("o")},
	}
	got, err := keepSandboxToken(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "a-credentials", Namespace: "team", UID: "s1", ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Sandbox", Name: "a", UID: "u1"}}},
		Data: map[string][]byte{credentials.TokenDataKey: []byte("t")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed Secret (-want +got):\n%s", diff)
	}
}
