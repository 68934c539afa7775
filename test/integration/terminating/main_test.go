// Package terminating proves on a real kube-apiserver that controllers stop creating in a
// namespace that is being deleted: the API server's NamespaceLifecycle admission refuses every
// create there until the namespace is gone, and a namespace whose Pods cannot be torn down stays
// that way for as long as it takes. envtest runs no namespace controller, so a deleted namespace
// stays Terminating for the whole test, as such a stuck one does. The reconcilers are driven by
// hand, pass by pass, and the API server's own request counter says what they sent.
package terminating

import (
	"testing"

	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env)
}
