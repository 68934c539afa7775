package proxy

import (
	"context"
	"net"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
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

// sandbox is a Ready Sandbox default/bench at podIP whose container declares ports.
func sandbox(podIP string, ports ...string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "uid"},
		Status: agentsv1beta1.SandboxStatus{PodIPs: []string{podIP}, Conditions: []metav1.Condition{{
			Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.SandboxReasonDependenciesReady}}},
	}
	c := corev1.Container{Name: "main"}
	for _, p := range ports {
		n, err := strconv.Atoi(p)
		if err != nil {
			panic(err)
		}
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(n)})
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{c}
	return sb
}

// declared holds every port a test upstream listens on; loopbackSandboxes declares them all.
var declared struct {
	sync.Mutex
	ports []string
}

func declarePort(port string) {
	declared.Lock()
	defer declared.Unlock()
	declared.ports = append(declared.ports, port)
}

// loopbackSandboxes answers every name with a Ready Sandbox at 127.0.0.1 that declares the
// ports of the tests' upstreams.
type loopbackSandboxes struct{}

func (loopbackSandboxes) Sandbox(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	declared.Lock()
	defer declared.Unlock()
	sb := sandbox("127.0.0.1", declared.ports...)
	sb.Namespace, sb.Name = ns, name
	return sb, nil
}

func splitPort(hostport string) (string, string) {
	h, p, _ := net.SplitHostPort(hostport)
	return h, p
}
