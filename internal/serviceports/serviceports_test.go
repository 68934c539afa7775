package serviceports

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func port(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: p, Protocol: proto, TargetPort: intstr.FromInt32(p)}
}

func container(ports ...corev1.ContainerPort) corev1.Container {
	return corev1.Container{Name: "c", Ports: ports}
}

func TestDerive(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []corev1.ServicePort
	}{
		{name: "no ports gives nil", spec: corev1.PodSpec{Containers: []corev1.Container{container()}}},
		{
			name: "zero port skipped, protocol defaults to TCP, unnamed port gets a generated name",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(
				corev1.ContainerPort{ContainerPort: 0, Name: "zero"},
				corev1.ContainerPort{ContainerPort: 8080},
			)}},
			want: []corev1.ServicePort{port("p-8080-tcp", 8080, corev1.ProtocolTCP)},
		},
		{
			name: "sorted by port then protocol across containers",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(corev1.ContainerPort{ContainerPort: 9000, Name: "metrics"}),
				container(corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP, Name: "dns-udp"},
					corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolTCP, Name: "dns-tcp"}),
			}},
			want: []corev1.ServicePort{port("dns-tcp", 53, corev1.ProtocolTCP), port("dns-udp", 53, corev1.ProtocolUDP), port("metrics", 9000, corev1.ProtocolTCP)},
		},
		{
			name: "duplicates merged, first explicit name wins even after an unnamed declaration",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(corev1.ContainerPort{ContainerPort: 80}),
				container(corev1.ContainerPort{ContainerPort: 80, Name: "http"}, corev1.ContainerPort{ContainerPort: 80, Name: "web"}),
			}},
			want: []corev1.ServicePort{port("http", 80, corev1.ProtocolTCP)},
		},
		{
			name: "a name already taken by another port is not reused",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(
				corev1.ContainerPort{ContainerPort: 80, Name: "http"},
				corev1.ContainerPort{ContainerPort: 8080, Name: "http"},
			)}},
			want: []corev1.ServicePort{port("http", 80, corev1.ProtocolTCP), port("p-8080-tcp", 8080, corev1.ProtocolTCP)},
		},
		{
			name: "generated name collides with an explicit one and gets a suffix",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(
				corev1.ContainerPort{ContainerPort: 80},
				corev1.ContainerPort{ContainerPort: 81, Name: "p-80-tcp"},
			)}},
			want: []corev1.ServicePort{port("p-80-tcp-2", 80, corev1.ProtocolTCP), port("p-80-tcp", 81, corev1.ProtocolTCP)},
		},
		{
			name: "restartable init containers count, ordinary init containers do not",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "setup", Ports: []corev1.ContainerPort{{ContainerPort: 1111}}},
					{Name: "proxy", RestartPolicy: always, Ports: []corev1.ContainerPort{{ContainerPort: 15001, Name: "proxy"}}},
				},
				Containers: []corev1.Container{container(corev1.ContainerPort{ContainerPort: 8080, Name: "http"})},
			},
			want: []corev1.ServicePort{port("http", 8080, corev1.ProtocolTCP), port("proxy", 15001, corev1.ProtocolTCP)},
		},
		{
			name: "SCTP protocol lower-cased in generated names",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(corev1.ContainerPort{ContainerPort: 7, Protocol: corev1.ProtocolSCTP})}},
			want: []corev1.ServicePort{port("p-7-sctp", 7, corev1.ProtocolSCTP)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Derive(&tt.spec)); diff != "" {
				t.Errorf("Derive (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeclaresTCP(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "setup", Ports: []corev1.ContainerPort{{ContainerPort: 1111}}},
			{Name: "sandboxd", RestartPolicy: always, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
		},
		Containers: []corev1.Container{container(
			corev1.ContainerPort{ContainerPort: 80, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		)},
	}
	tests := []struct {
		port int
		want bool
	}{
		{port: 80, want: true},
		{port: 8080, want: true}, // a sidecar's port
		{port: 1111},             // an init container that ends before the Pod serves
		{port: 53},               // UDP only
		{port: 9999},
	}
	for _, tt := range tests {
		if got := DeclaresTCP(&spec, tt.port); got != tt.want {
			t.Errorf("DeclaresTCP(%d) = %v, want %v", tt.port, got, tt.want)
		}
	}
}
