package podresize

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Sizes are the CPU and memory of a container; nil leaves the template's value.
type Sizes struct {
	CPU    *resource.Quantity
	Memory *resource.Quantity
}

// IsZero reports whether the sizes change nothing.
func (s Sizes) IsZero() bool { return s.CPU == nil && s.Memory == nil }

// Idle returns the sizes members of a pool with these annotations wait with.
func Idle(poolAnnotations map[string]string) (Sizes, error) {
	return parse(poolAnnotations, extensionsv1beta1.IdleCPUAnnotation, extensionsv1beta1.IdleMemoryAnnotation)
}

// Bounds returns the most a claim of a pool with these annotations may ask for; a nil field means
// claims may not choose that resource.
func Bounds(poolAnnotations map[string]string) (Sizes, error) {
	return parse(poolAnnotations, extensionsv1beta1.ClaimCPUMaxAnnotation, extensionsv1beta1.ClaimMemoryMaxAnnotation)
}

// Requested returns what a claim with these annotations asks for.
func Requested(claimAnnotations map[string]string) (Sizes, error) {
	return parse(claimAnnotations, extensionsv1beta1.CPUAnnotation, extensionsv1beta1.MemoryAnnotation)
}

// Check returns an error naming the claim's annotation when it asks for more than bounds (those of
// SandboxWarmPool pool) allow, or for a resource the pool does not let claims choose.
func Check(requested, bounds Sizes, pool string) error {
	for _, c := range []struct {
		asked, max  *resource.Quantity
		key, maxKey string
	}{
		{requested.CPU, bounds.CPU, extensionsv1beta1.CPUAnnotation, extensionsv1beta1.ClaimCPUMaxAnnotation},
		{requested.Memory, bounds.Memory, extensionsv1beta1.MemoryAnnotation, extensionsv1beta1.ClaimMemoryMaxAnnotation},
	} {
		switch {
		case c.asked == nil:
		case c.max == nil:
			return fmt.Errorf("metadata.annotations[%s]: SandboxWarmPool %q does not let claims choose this resource; remove the annotation or set %s on the pool",
				c.key, pool, c.maxKey)
		case c.asked.Cmp(*c.max) > 0:
			return fmt.Errorf("metadata.annotations[%s]: %s is above %s %s of SandboxWarmPool %q; ask for at most %s",
				c.key, c.asked, c.maxKey, c.max, pool, c.max)
		}
	}
	return nil
}

// parse reads two quantity annotations; an error names the first bad one and the fix.
func parse(annotations map[string]string, cpuKey, memoryKey string) (Sizes, error) {
	var s Sizes
	var err error
	if s.CPU, err = quantity(annotations, cpuKey, "500m"); err != nil {
		return Sizes{}, err
	}
	if s.Memory, err = quantity(annotations, memoryKey, "256Mi"); err != nil {
		return Sizes{}, err
	}
	return s, nil
}

func quantity(annotations map[string]string, key, example string) (*resource.Quantity, error) {
	v, ok := annotations[key]
	if !ok {
		return nil, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		return nil, fmt.Errorf("metadata.annotations[%s]: %s is not a quantity above zero; set for example %s", key, v, example)
	}
	return &q, nil
}

// Apply sizes a container's resources: each given size becomes its request, and its limit where
// it has one. A limit equal to the request stays equal (a Guaranteed Pod stays Guaranteed); a
// larger limit is kept, raised to the request if the request passes it (a Burstable Pod stays
// Burstable). A request set only through its limit (the API server defaults one to the other)
// counts as set. With onlyRequested, resources the container does not request are left alone,
// so that a Pod that is BestEffort in a resource is never given a request it could not shed.
func Apply(res *corev1.ResourceRequirements, s Sizes, onlyRequested bool) {
	for name, q := range map[corev1.ResourceName]*resource.Quantity{corev1.ResourceCPU: s.CPU, corev1.ResourceMemory: s.Memory} {
		if q == nil {
			continue
		}
		req, hasReq := res.Requests[name]
		lim, hasLim := res.Limits[name]
		if !hasReq && hasLim {
			req, hasReq = lim, true
		}
		if !hasReq && onlyRequested {
			continue
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[name] = q.DeepCopy()
		switch {
		case !hasLim:
		case lim.Cmp(req) == 0 || lim.Cmp(*q) < 0:
			res.Limits[name] = q.DeepCopy()
		}
	}
}

// Equal reports whether two containers' resources ask for the same CPU and memory, requests and
// limits, as the API server stores them (a limit without a request defaults the request); other
// resources are not compared.
func Equal(a, b corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !sameQuantity(request(a, name), request(b, name)) || !sameQuantity(lookup(a.Limits, name), lookup(b.Limits, name)) {
			return false
		}
	}
	return true
}

func request(r corev1.ResourceRequirements, name corev1.ResourceName) *resource.Quantity {
	if q := lookup(r.Requests, name); q != nil {
		return q
	}
	return lookup(r.Limits, name)
}

func lookup(l corev1.ResourceList, name corev1.ResourceName) *resource.Quantity {
	if q, ok := l[name]; ok {
		return &q
	}
	return nil
}

func sameQuantity(a, b *resource.Quantity) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Cmp(*b) == 0)
}
