// Package router runs paddock-router against a real kube-apiserver: its informer resolves real
// Sandbox objects whose status the tests write, and it proxies to upstream servers the tests run
// on 127.0.0.x. Those loopback pod IPs are reachable only through router.Config.Policy, a Go
// field no flag sets.
package router

import (
	"testing"

	"github.com/go-logr/logr"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	// The informer cache logs through controller-runtime's global logger; the tests read the
	// router's own log through each test's t.
	crlog.SetLogger(logr.Discard())
	framework.RunMain(m, &env)
}
