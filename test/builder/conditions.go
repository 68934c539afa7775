package builder

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HasCondition returns nil when conditions hold a condition of the given type, status and reason,
// and otherwise an error that shows what is there. An empty reason matches any reason.
func HasCondition(conditions []metav1.Condition, condType string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conditions, condType)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition; conditions: %s", condType, FormatConditions(conditions))
	case c.Status != status || (reason != "" && c.Reason != reason):
		return fmt.Errorf("%s is %s/%s (%q), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// LacksCondition returns nil when conditions hold no condition of the given type.
func LacksCondition(conditions []metav1.Condition, condType string) error {
	if c := meta.FindStatusCondition(conditions, condType); c != nil {
		return fmt.Errorf("unexpected %s condition %s/%s (%q)", condType, c.Status, c.Reason, c.Message)
	}
	return nil
}

// FormatConditions renders conditions compactly for failure messages.
func FormatConditions(conditions []metav1.Condition) string {
	s := "["
	for i, c := range conditions {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return s + "]"
}
