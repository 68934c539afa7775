package devcluster

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/autosize"
)

// The dev `base` and `code-interpreter-v1` templates run sandboxd as their runtime, so a create's
// envVars are served warm through claim settings, and declare the envd port: the router dials
// declared ports only.
func TestE2BTemplateIsWarmSandboxdWithTheEnvdPort(t *testing.T) {
	for _, gvisor := range []bool{false, true} {
		for _, tpl := range []*extensionsv1beta1.SandboxTemplate{E2BTemplate("registry.test/sandbox:dev", gvisor), CodeInterpreterTemplate("registry.test/ci:dev", gvisor)} {
			checkE2BTemplate(t, tpl, gvisor)
		}
	}
}

func checkE2BTemplate(t *testing.T, tpl *extensionsv1beta1.SandboxTemplate, gvisor bool) {
	t.Helper()
	if got := tpl.Annotations[extensionsv1beta1.RuntimeAnnotation]; got != extensionsv1beta1.RuntimeSandboxd {
		t.Errorf("%s gvisor=%v: annotation %s = %q, want %q", tpl.Name, gvisor, extensionsv1beta1.RuntimeAnnotation, got, extensionsv1beta1.RuntimeSandboxd)
	}
	want := snapshotsv1alpha1.SuspendRootfs // runc: pause keeps the root filesystem
	if gvisor {
		want = snapshotsv1alpha1.SuspendMemory // gVisor: pause keeps the processes, as E2B's does
	}
	if got := tpl.Annotations[snapshotsv1alpha1.SuspendAnnotation]; got != want {
		t.Errorf("%s gvisor=%v: annotation %s = %q, want %q", tpl.Name, gvisor, snapshotsv1alpha1.SuspendAnnotation, got, want)
	}
	declared := false
	for _, p := range tpl.Spec.PodTemplate.Spec.Containers[0].Ports {
		declared = declared || p.ContainerPort == e2b.EnvdPort
	}
	if !declared {
		t.Errorf("%s gvisor=%v: the sandboxd container does not declare port %d", tpl.Name, gvisor, e2b.EnvdPort)
	}
	if rc := tpl.Spec.PodTemplate.Spec.RuntimeClassName; (rc != nil) != gvisor {
		t.Errorf("%s gvisor=%v: RuntimeClassName %v", tpl.Name, gvisor, rc)
	}
	// env-base holds setuid binaries from its packages; no_new_privs keeps them inert.
	sc := tpl.Spec.PodTemplate.Spec.Containers[0].SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("%s gvisor=%v: container securityContext %+v; want allowPrivilegeEscalation false and every capability dropped", tpl.Name, gvisor, sc)
	}
}

// The code-interpreter template serves the interpreter on E2B's port 49999 and declares it, and
// runs the code-interpreter image it is given.
func TestCodeInterpreterTemplateServesPort49999(t *testing.T) {
	tpl := CodeInterpreterTemplate("registry.test/ci:dev", true)
	c := tpl.Spec.PodTemplate.Spec.Containers[0]
	if tpl.Name != "code-interpreter-v1" || c.Image != "registry.test/ci:dev" {
		t.Errorf("template %s runs %s; want code-interpreter-v1 running registry.test/ci:dev", tpl.Name, c.Image)
	}
	if !slices.Contains(c.Args, "--interpreter-port=49999") {
		t.Errorf("sandboxd args %v; want --interpreter-port=49999", c.Args)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 49999 }) {
		t.Errorf("ports %v; want 49999 declared", c.Ports)
	}
	if slices.Contains(E2BTemplate("registry.test/sandbox:dev", true).Spec.PodTemplate.Spec.Containers[0].Args, "--interpreter-port=49999") {
		t.Error("the base template starts the interpreter; only code-interpreter-v1 should")
	}
}

// The dev pools size themselves from demand: `base` between 2 and 8 members,
// `code-interpreter-v1` between 1 and 4, each starting at its min.
func TestE2BPoolsAreAutosized(t *testing.T) {
	for _, c := range []struct {
		pool     *extensionsv1beta1.SandboxWarmPool
		min, max int32
	}{{E2BPool(), 2, 8}, {CodeInterpreterPool(), 1, 4}} {
		p, on, err := autosize.FromAnnotations(c.pool.Annotations)
		if err != nil || !on {
			t.Fatalf("autosize on pool %s: on %v, %v", c.pool.Name, on, err)
		}
		if p.Min != c.min || p.Max != c.max {
			t.Errorf("pool %s autosizes between %d and %d, want %d and %d", c.pool.Name, p.Min, p.Max, c.min, c.max)
		}
		if r := *c.pool.Spec.Replicas; r != p.Min || c.pool.Spec.TemplateRef.Name != c.pool.Name {
			t.Errorf("pool %s starts with %d replicas of template %s; want its min %d of its own template", c.pool.Name, r, c.pool.Spec.TemplateRef.Name, p.Min)
		}
	}
}
