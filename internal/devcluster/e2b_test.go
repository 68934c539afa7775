package devcluster

import (
	"testing"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/autosize"
)

// The dev `base` template runs sandboxd as its runtime, so a create's envVars are served warm
// through claim settings, and declares the envd port, the only port the router dials for E2B.
func TestE2BTemplateIsWarmSandboxdWithTheEnvdPort(t *testing.T) {
	for _, gvisor := range []bool{false, true} {
		tpl := E2BTemplate("registry.test/sandbox:dev", gvisor)
		if got := tpl.Annotations[extensionsv1beta1.RuntimeAnnotation]; got != extensionsv1beta1.RuntimeSandboxd {
			t.Errorf("gvisor=%v: annotation %s = %q, want %q", gvisor, extensionsv1beta1.RuntimeAnnotation, got, extensionsv1beta1.RuntimeSandboxd)
		}
		declared := false
		for _, p := range tpl.Spec.PodTemplate.Spec.Containers[0].Ports {
			declared = declared || p.ContainerPort == e2b.EnvdPort
		}
		if !declared {
			t.Errorf("gvisor=%v: the sandboxd container does not declare port %d", gvisor, e2b.EnvdPort)
		}
		if rc := tpl.Spec.PodTemplate.Spec.RuntimeClassName; (rc != nil) != gvisor {
			t.Errorf("gvisor=%v: RuntimeClassName %v", gvisor, rc)
		}
		// env-base holds setuid binaries from its packages; no_new_privs keeps them inert.
		sc := tpl.Spec.PodTemplate.Spec.Containers[0].SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("gvisor=%v: container securityContext %+v; want allowPrivilegeEscalation false and every capability dropped", gvisor, sc)
		}
	}
}

// The dev `base` pool sizes itself from demand between 2 and 8 members.
func TestE2BPoolIsAutosized(t *testing.T) {
	p, on, err := autosize.FromAnnotations(E2BPool().Annotations)
	if err != nil || !on {
		t.Fatalf("autosize on the base pool: on %v, %v", on, err)
	}
	if p.Min != 2 || p.Max != 8 {
		t.Errorf("base pool autosizes between %d and %d, want 2 and 8", p.Min, p.Max)
	}
	if r := *E2BPool().Spec.Replicas; r < p.Min || r > p.Max {
		t.Errorf("base pool starts with %d replicas, outside its autosize bounds [%d, %d]", r, p.Min, p.Max)
	}
}
