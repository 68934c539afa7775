// Package e2bfrontdoor proves the E2B front door against a real API server with every controller running
// as main wires them; the test plays the kubelet, and a loopback stand-in plays the sandboxes'
// daemon (sandboxd's envd protocol is tested in sandboxd's own packages).
package e2bfrontdoor

import (
	"testing"

	"github.com/go-logr/logr"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	framework.RunMain(m, &env, framework.StartControllers)
}
