package sandboxsnapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRunsImage(t *testing.T) {
	const image = "127.0.0.1:5001/snapshots/ns/snap@sha256:aa"
	tests := []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"container", corev1.PodSpec{Containers: []corev1.Container{{Image: "other"}, {Image: image}}}, true},
		{"init container", corev1.PodSpec{InitContainers: []corev1.Container{{Image: image}}, Containers: []corev1.Container{{Image: "other"}}}, true},
		{"another digest of the repository", corev1.PodSpec{Containers: []corev1.Container{{Image: "127.0.0.1:5001/snapshots/ns/snap@sha256:bb"}}}, false},
		{"none", corev1.PodSpec{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runsImage(&tt.spec, image); got != tt.want {
				t.Errorf("runsImage = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDescribeUsers(t *testing.T) {
	tests := []struct {
		users []string
		want  string
	}{
		{[]string{"Sandbox a"}, "Sandbox a"},
		{[]string{"Sandbox a", "Sandbox b", "Sandbox c"}, "Sandbox a, Sandbox b, Sandbox c"},
		{[]string{"Sandbox a", "Sandbox b", "Sandbox c", "Sandbox d", "SandboxTemplate t"}, "Sandbox a, Sandbox b, Sandbox c and 2 more"},
	}
	for _, tt := range tests {
		if got := describeUsers(tt.users); got != tt.want {
			t.Errorf("describeUsers(%q) = %q, want %q", tt.users, got, tt.want)
		}
	}
}
