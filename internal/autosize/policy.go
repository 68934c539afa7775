// Package autosize decides how many members a SandboxWarmPool with paddock.dev/autosize keeps:
// enough for the claims it sees while replacements start (claim rate times the time a member
// takes to become Ready, plus headroom), between a minimum and a maximum. It scales up at once
// and down only after demand stayed lower for a stabilization window (docs/design/autosize.md).
//
// Decide is pure; Demand keeps each pool's observations behind a mutex. No client, no context,
// no logging.
package autosize

import (
	"errors"
	"fmt"
	"strconv"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Policy is a pool's autosize annotations, read and checked.
type Policy struct {
	Min, Max, Headroom int32
}

// FromAnnotations reads a pool's autosize annotations. on says whether autosize is asked for
// (paddock.dev/autosize "true"); err names every annotation whose value cannot be used, and the
// fix. A pool with a bad value keeps its spec.replicas.
func FromAnnotations(annotations map[string]string) (p Policy, on bool, err error) {
	switch v, set := annotations[extensionsv1beta1.AutosizeAnnotation]; {
	case !set || v == "false":
		return Policy{}, false, nil
	case v != "true":
		return Policy{}, true, fmt.Errorf("metadata.annotations[%s]: %q must be \"true\" or \"false\"", extensionsv1beta1.AutosizeAnnotation, v)
	}
	var errs []error
	number := func(key string, least, def int32) int32 {
		v, set := annotations[key]
		if !set {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < int64(least) || n > extensionsv1beta1.AutosizeLimit {
			errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %q is not an integer from %d to %d; set for example %q",
				key, v, least, extensionsv1beta1.AutosizeLimit, strconv.Itoa(int(def))))
			return def
		}
		return int32(n)
	}
	p = Policy{
		Min:      number(extensionsv1beta1.AutosizeMinAnnotation, 0, extensionsv1beta1.AutosizeDefaultMin),
		Max:      number(extensionsv1beta1.AutosizeMaxAnnotation, 1, extensionsv1beta1.AutosizeDefaultMax),
		Headroom: number(extensionsv1beta1.AutosizeHeadroomAnnotation, 0, extensionsv1beta1.AutosizeDefaultHeadroom),
	}
	if len(errs) == 0 && p.Min > p.Max {
		errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %d is above the maximum %d (%s, %d when absent); lower the minimum or raise the maximum",
			extensionsv1beta1.AutosizeMinAnnotation, p.Min, p.Max, extensionsv1beta1.AutosizeMaxAnnotation, extensionsv1beta1.AutosizeDefaultMax))
	}
	return p, true, errors.Join(errs...)
}

// Clamp returns n within [p.Min, p.Max].
func (p Policy) Clamp(n int32) int32 { return max(p.Min, min(n, p.Max)) }
