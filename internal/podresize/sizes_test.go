package podresize

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestParseAndCheck(t *testing.T) {
	bounds, err := Bounds(map[string]string{"paddock.dev/claim-cpu-max": "2", "paddock.dev/claim-memory-max": "1Gi"})
	if err != nil {
		t.Fatal(err)
	}
	cpuOnly, _ := Bounds(map[string]string{"paddock.dev/claim-cpu-max": "2"})
	cases := []struct {
		name    string
		claim   map[string]string
		bounds  Sizes
		wantErr string
	}{
		{"nothing asked", nil, Sizes{}, ""},
		{"within", map[string]string{"paddock.dev/cpu": "1500m", "paddock.dev/memory": "1Gi"}, bounds, ""},
		{"cpu above", map[string]string{"paddock.dev/cpu": "3"}, bounds, "metadata.annotations[paddock.dev/cpu]: 3 is above paddock.dev/claim-cpu-max 2 of SandboxWarmPool \"p\"; ask for at most 2"},
		{"memory above", map[string]string{"paddock.dev/memory": "2Gi"}, bounds, "metadata.annotations[paddock.dev/memory]: 2Gi is above paddock.dev/claim-memory-max 1Gi"},
		{"memory not choosable", map[string]string{"paddock.dev/memory": "128Mi"}, cpuOnly, "metadata.annotations[paddock.dev/memory]: SandboxWarmPool \"p\" does not let claims choose this resource; remove the annotation or set paddock.dev/claim-memory-max on the pool"},
		{"not a quantity", map[string]string{"paddock.dev/cpu": "two"}, bounds, "metadata.annotations[paddock.dev/cpu]: two is not a quantity above zero; set for example 500m"},
		{"zero", map[string]string{"paddock.dev/memory": "0"}, bounds, "metadata.annotations[paddock.dev/memory]: 0 is not a quantity above zero"},
		{"negative", map[string]string{"paddock.dev/cpu": "-1"}, bounds, "not a quantity above zero"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Requested(tc.claim)
			if err == nil {
				err = Check(req, tc.bounds, "p")
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	if _, err := Idle(map[string]string{"paddock.dev/idle-cpu": "10x"}); err == nil || !strings.Contains(err.Error(), "paddock.dev/idle-cpu") {
		t.Errorf("bad idle-cpu: error %v does not name the annotation", err)
	}
}

func TestApplyKeepsTheQoSClass(t *testing.T) {
	cases := []struct {
		name          string
		in            corev1.ResourceRequirements
		sizes         Sizes
		onlyRequested bool
		want          corev1.ResourceRequirements
	}{
		{"guaranteed stays guaranteed",
			corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")},
			Sizes{CPU: q("10m"), Memory: q("32Mi")}, true,
			corev1.ResourceRequirements{Requests: list("cpu", "10m", "memory", "32Mi"), Limits: list("cpu", "10m", "memory", "32Mi")}},
		{"burstable keeps its larger limit",
			corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "256Mi"), Limits: list("memory", "1Gi")},
			Sizes{CPU: q("10m"), Memory: q("32Mi")}, true,
			corev1.ResourceRequirements{Requests: list("cpu", "10m", "memory", "32Mi"), Limits: list("memory", "1Gi")}},
		{"a request above the limit raises it",
			corev1.ResourceRequirements{Requests: list("memory", "256Mi"), Limits: list("memory", "1Gi")},
			Sizes{Memory: q("2Gi")}, false,
			corev1.ResourceRequirements{Requests: list("memory", "2Gi"), Limits: list("memory", "2Gi")}},
		{"a limit alone counts as the request",
			corev1.ResourceRequirements{Limits: list("cpu", "2")},
			Sizes{CPU: q("100m")}, true,
			corev1.ResourceRequirements{Requests: list("cpu", "100m"), Limits: list("cpu", "100m")}},
		{"idle leaves a resource the template does not request",
			corev1.ResourceRequirements{Requests: list("memory", "256Mi")},
			Sizes{CPU: q("10m"), Memory: q("32Mi")}, true,
			corev1.ResourceRequirements{Requests: list("memory", "32Mi")}},
		{"a claim may add a request",
			corev1.ResourceRequirements{},
			Sizes{CPU: q("1")}, false,
			corev1.ResourceRequirements{Requests: list("cpu", "1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := *tc.in.DeepCopy()
			Apply(&got, tc.sizes, tc.onlyRequested)
			if !Equal(got, tc.want) || len(got.Limits) != len(tc.want.Limits) {
				t.Errorf("Apply = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	want := []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: list("cpu", "1")}}}
	pod := func(spec, status string, conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name = "sb"
		p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: list("cpu", spec)}}}
		if status != "" {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Resources: &corev1.ResourceRequirements{Requests: list("cpu", status)}}}
		}
		p.Status.Conditions = conds
		return p
	}
	pending := func(reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, Message: "Node didn't have enough capacity: cpu, requested: 1000, capacity: 500"}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"not sent yet", pod("10m", "10m"), "ResizeInProgress"},
		{"sent, kubelet silent", pod("1", "10m"), "ResizeInProgress"},
		{"sent, no container status", pod("1", ""), "ResizeInProgress"},
		{"in progress", pod("1", "10m", corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}), "ResizeInProgress"},
		{"deferred", pod("1", "10m", pending(corev1.PodReasonDeferred)), "ResizeDeferred"},
		{"infeasible", pod("1", "10m", pending(corev1.PodReasonInfeasible)), "ResizeInfeasible"},
		{"error", pod("1", "10m", corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError}), "ResizeFailed"},
		{"done", pod("1", "1"), "Resized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.pod, want)
			if diff := cmp.Diff(tc.want, got.Reason); diff != "" {
				t.Errorf("Observe reason (-want +got):\n%s (message %q)", diff, got.Message)
			}
			if got.Done() != (tc.want == "Resized") {
				t.Errorf("Done() = %v for reason %s", got.Done(), got.Reason)
			}
		})
	}
	if got := Observe(pod("1", "10m", pending(corev1.PodReasonInfeasible)), want); !strings.Contains(got.Message, "Node didn't have enough capacity") {
		t.Errorf("the Infeasible message %q does not carry the kubelet's", got.Message)
	}
}

// TestResizing: only a Sandbox marked for in-place resize waits, until its Resized condition is
// True for its current generation; a True left from before the adoption does not count.
func TestResizing(t *testing.T) {
	sb := func(marked bool, gen, condGen int64, status metav1.ConditionStatus) *agentsv1beta1.Sandbox {
		s := &agentsv1beta1.Sandbox{}
		s.Name, s.Generation = "sb", gen
		if marked {
			s.Annotations = map[string]string{agentsv1beta1.InPlaceResizeAnnotation: "true"}
		}
		if condGen > 0 {
			s.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionResized, Status: status, ObservedGeneration: condGen, Message: "kubelet says"}}
		}
		return s
	}
	cases := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want bool
	}{
		{"not marked", sb(false, 2, 0, ""), false},
		{"marked, resized", sb(true, 2, 2, metav1.ConditionTrue), false},
		{"marked, resized before the adoption", sb(true, 2, 1, metav1.ConditionTrue), true},
		{"marked, in progress", sb(true, 2, 2, metav1.ConditionFalse), true},
		{"marked, not observed", sb(true, 2, 0, ""), true},
	}
	for _, tc := range cases {
		if got, why := Resizing(tc.sb); got != tc.want || (got && why == "") {
			t.Errorf("%s: Resizing = %v, %q; want %v with a reason", tc.name, got, why, tc.want)
		}
	}
}
