// Package serviceports reads the ports a Sandbox's pod spec declares, those of its containers and
// of its sidecars (restartable init containers): the ports of its headless Service, and whether
// a port is served at all. It is pure: no client, no context, no logging.
package serviceports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type portKey struct {
	port     int32
	protocol corev1.Protocol
}

// Derive returns one ServicePort per distinct (port, protocol) declared by the containers and the
// restartable init containers (sidecars) of spec, sorted by port then protocol, or nil when there
// are none. A port keeps the first explicit name given to it unless another port already uses that
// name; unnamed ports are called "p-<port>-<protocol>", with "-2", "-3", ... on a collision.
func Derive(spec *corev1.PodSpec) []corev1.ServicePort {
	var order []portKey
	names := map[portKey]string{}
	for _, p := range declaredPorts(spec) {
		key := portKey{port: p.ContainerPort, protocol: cmp.Or(p.Protocol, corev1.ProtocolTCP)}
		current, seen := names[key]
		if !seen {
			order = append(order, key)
			names[key] = ""
		}
		if current == "" && p.Name != "" {
			names[key] = p.Name
		}
	}
	if len(order) == 0 {
		return nil
	}
	slices.SortFunc(order, func(a, b portKey) int {
		return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.protocol, b.protocol))
	})

	used := map[string]bool{}
	ports := make([]corev1.ServicePort, len(order))
	// Explicit names are claimed first, in port order, so a generated name never takes one away.
	for i, key := range order {
		if name := names[key]; name != "" && !used[name] {
			used[name] = true
			ports[i].Name = name
		}
	}
	for i, key := range order {
		if ports[i].Name == "" {
			ports[i].Name = freeName(fmt.Sprintf("p-%d-%s", key.port, strings.ToLower(string(key.protocol))), used)
		}
		ports[i].Port = key.port
		ports[i].Protocol = key.protocol
		ports[i].TargetPort = intstr.FromInt32(key.port)
	}
	return ports
}

// DeclaresTCP reports whether a container of spec, or one of its sidecars, declares port as a TCP
// containerPort. The router and the controllers reach a Sandbox only on such ports.
func DeclaresTCP(spec *corev1.PodSpec, port int) bool {
	for _, p := range declaredPorts(spec) {
		if int(p.ContainerPort) == port && cmp.Or(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP {
			return true
		}
	}
	return false
}

// declaredPorts lists the non-zero container ports of the regular containers and of the init
// containers that keep running next to them.
func declaredPorts(spec *corev1.PodSpec) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	add := func(c corev1.Container) {
		for _, p := range c.Ports {
			if p.ContainerPort != 0 {
				ports = append(ports, p)
			}
		}
	}
	for _, c := range spec.Containers {
		add(c)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return ports
}

func freeName(base string, used map[string]bool) string {
	name := base
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	used[name] = true
	return name
}
