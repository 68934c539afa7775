// Package warmresources proves warm resources (docs/design/warm-resources.md) on a real
// kube-apiserver with every Paddock controller: members of a pool with paddock.dev/idle-cpu and
// idle-memory wait small; a claim resizes its member in place through the Pod's resize
// subresource (same Pod, no new one) to the template's or its own resources and turns Ready only
// once the Pod reports them; a resize the node cannot fit is a claim condition and the claim is
// served cold; out-of-bounds resources are refused at admission, naming the annotation. The API
// server runs no kubelet: the tests write Pod status as the kubelet would.
package warmresources

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

// giveUp is how long a claim waits for a deferred resize here: long enough for a test to answer
// a resize on a loaded machine, short enough to watch a claim give up.
const giveUp = 10 * time.Second

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return framework.StartControllersWith(e, func(o *manager.Options) { o.SandboxClaimResizeGiveUp = giveUp }, noop.NewTracerProvider())
	})
}
