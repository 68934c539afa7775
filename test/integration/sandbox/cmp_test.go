package sandbox

import (
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

func cmpIgnoreConditions() cmp.Option {
	return cmpopts.IgnoreFields(agentsv1beta1.SandboxStatus{}, "Conditions")
}

func mergeFrom(obj client.Object) client.Patch { return client.MergeFrom(obj) }

func equalStatus(a, b agentsv1beta1.SandboxStatus) bool {
	return cmp.Equal(a, b, cmpopts.EquateEmpty())
}
