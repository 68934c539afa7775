// Package api proves the API contract on a real kube-apiserver: defaults, enums, bounds, CEL
// rules, subresources and printer columns of the generated CRDs.
package api

import (
	"testing"

	"github.com/paddock-dev/paddock/test/framework"
)

var env *framework.Env

func TestMain(m *testing.M) { framework.RunMain(m, &env) }
