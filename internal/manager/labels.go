package manager

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// labelsValue is a flag.Value for a k=v[,k=v] label map.
type labelsValue struct{ m *map[string]string }

func (v labelsValue) String() string {
	if v.m == nil || *v.m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*v.m))
	for k, val := range *v.m {
		pairs = append(pairs, k+"="+val)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (v labelsValue) Set(s string) error {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", pair)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			return fmt.Errorf("label value %q: %s", val, strings.Join(errs, "; "))
		}
		out[k] = val
	}
	*v.m = out
	return nil
}
