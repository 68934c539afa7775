package blueprint

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// TestSuspendModeStamped: the template's snapshots.paddock.dev/suspend reaches its pool members
// and cold Sandboxes; a claim's overrides it, on a cold Sandbox and on an adopted member, "" too.
// The value is carried as it is: rootfs and memory alike.
func TestSuspendModeStamped(t *testing.T) {
	const key = snapshotsv1alpha1.SuspendAnnotation
	pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	for _, tt := range []struct {
		name       string
		tpl, claim map[string]string
		want       string
	}{
		{name: "neither", want: ""},
		{name: "template", tpl: map[string]string{key: "rootfs"}, want: "rootfs"},
		{name: "claim", claim: map[string]string{key: "rootfs"}, want: "rootfs"},
		{name: "claim turns it off", tpl: map[string]string{key: "rootfs"}, claim: map[string]string{key: ""}, want: ""},
		{name: "template keeps memory", tpl: map[string]string{key: "memory"}, want: "memory"},
		{name: "claim asks for memory over the template's rootfs", tpl: map[string]string{key: "rootfs"}, claim: map[string]string{key: "memory"}, want: "memory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tpl := template()
			tpl.Annotations = tt.tpl
			c := claim()
			c.Annotations = tt.claim
			cold, err := ColdSandbox(c, tpl)
			if err != nil {
				t.Fatal(err)
			}
			member := PoolMember(pool, tpl, PoolOptions{})
			member.Name = "pool-abcde"
			if err := Adopt(member, c, tpl); err != nil {
				t.Fatal(err)
			}
			for what, annotations := range map[string]map[string]string{"cold": cold.Annotations, "adopted": member.Annotations} {
				if got := annotations[key]; got != tt.want {
					t.Errorf("%s Sandbox: %s = %q, want %q", what, key, got, tt.want)
				}
			}
		})
	}
}
