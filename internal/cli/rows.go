package cli

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// ClaimTable is the table of `paddock ls` and `paddock get`; now makes AGE testable.
func ClaimTable(claims []extensionsv1beta1.SandboxClaim, now time.Time) Table {
	t := Table{Header: []string{"NAME", "POOL", "READY", "SANDBOX", "REASON", "AGE"}}
	for _, c := range claims {
		ready, reason := "Unknown", ""
		if cond := meta.FindStatusCondition(c.Status.Conditions, extensionsv1beta1.ClaimConditionReady); cond != nil {
			ready, reason = string(cond.Status), cond.Reason
		}
		t.Rows = append(t.Rows, []string{c.Name, c.Spec.WarmPoolRef.Name, ready, dash(c.Status.Sandbox.Name), dash(reason), age(c.CreationTimestamp, now)})
	}
	return t
}

// PoolTable is the table of `paddock pool ls`.
func PoolTable(pools []extensionsv1beta1.SandboxWarmPool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "TEMPLATE", "DESIRED", "CURRENT", "READY", "AGE"}}
	for _, p := range pools {
		desired := int32(1) // the API's default when spec.replicas is unset
		if p.Spec.Replicas != nil {
			desired = *p.Spec.Replicas
		}
		t.Rows = append(t.Rows, []string{p.Name, p.Spec.TemplateRef.Name, itoa(desired), itoa(p.Status.Replicas), itoa(p.Status.ReadyReplicas), age(p.CreationTimestamp, now)})
	}
	return t
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(created metav1.Time, now time.Time) string {
	if created.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(created.Time))
}
