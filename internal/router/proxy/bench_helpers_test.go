package proxy

import (
	"context"
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// staticLookup serves one Sandbox, as a warm informer cache would.
type staticLookup struct{ sb *agentsv1beta1.Sandbox }

func (s staticLookup) Sandbox(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	if ns == s.sb.Namespace && name == s.sb.Name {
		return s.sb, nil
	}
	return nil, nil
}

func sandbox(podIP string) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "uid"},
		Status: agentsv1beta1.SandboxStatus{PodIPs: []string{podIP}, Conditions: []metav1.Condition{{
			Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.SandboxReasonDependenciesReady}}},
	}
}

func splitPort(hostport string) (string, string) {
	h, p, _ := net.SplitHostPort(hostport)
	return h, p
}
