package blueprint

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Errors of the injection policies. Callers map them to condition reasons with errors.Is.
var (
	// ErrEnvInjectionRejected means the claim's env is not acceptable under the template's policy.
	ErrEnvInjectionRejected = errors.New("environment variable injection rejected")
	// ErrVolumeClaimTemplates means the claim's or template's volume claim templates are unusable.
	ErrVolumeClaimTemplates = errors.New("volume claim templates rejected")
)

// InjectEnv adds a claim's environment variables to spec under the template's policy. Entries
// without a container name go to the first regular container.
func InjectEnv(spec *corev1.PodSpec, env []extensionsv1beta1.EnvVar, policy extensionsv1beta1.EnvVarsInjectionPolicy) error {
	if len(env) == 0 {
		return nil
	}
	if policy != extensionsv1beta1.EnvVarsInjectionPolicyAllowed && policy != extensionsv1beta1.EnvVarsInjectionPolicyOverrides {
		return fmt.Errorf("%w: the template's envVarsInjectionPolicy is %q; set it to Allowed or Overrides, or remove spec.env from the claim",
			ErrEnvInjectionRejected, orDefault(string(policy), string(extensionsv1beta1.EnvVarsInjectionPolicyDisallowed)))
	}
	for _, e := range env {
		c := targetContainer(spec, e.ContainerName)
		if c == nil {
			if e.ContainerName == "" {
				return fmt.Errorf("%w: the template has no container for environment variable %q", ErrEnvInjectionRejected, e.Name)
			}
			return fmt.Errorf("%w: target container %q not found in template for environment variable %q", ErrEnvInjectionRejected, e.ContainerName, e.Name)
		}
		if policy == extensionsv1beta1.EnvVarsInjectionPolicyAllowed && len(c.EnvFrom) > 0 {
			return fmt.Errorf("%w: container %q uses envFrom, so variable %q could silently override it; the template policy must be Overrides",
				ErrEnvInjectionRejected, c.Name, e.Name)
		}
		i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name })
		switch {
		case i < 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		case policy == extensionsv1beta1.EnvVarsInjectionPolicyOverrides:
			c.Env[i] = corev1.EnvVar{Name: e.Name, Value: e.Value}
		default:
			return fmt.Errorf("%w: environment variable override is not allowed by the template policy for variable %q", ErrEnvInjectionRejected, e.Name)
		}
	}
	return nil
}

func targetContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	if name == "" {
		if len(spec.Containers) == 0 {
			return nil
		}
		return &spec.Containers[0]
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

// MergeVolumeClaimTemplates combines the template's volume claim templates with a claim's
// under the template's policy. Overrides keeps the template's order, replaces entries of the
// same name and appends new ones.
func MergeVolumeClaimTemplates(tpl, claim []agentsv1beta1.PersistentVolumeClaimTemplate, policy extensionsv1beta1.VolumeClaimTemplatesPolicy) ([]agentsv1beta1.PersistentVolumeClaimTemplate, error) {
	if err := validateVCTs("template", tpl); err != nil {
		return nil, err
	}
	if len(claim) == 0 {
		return tpl, nil
	}
	if err := validateVCTs("claim", claim); err != nil {
		return nil, err
	}
	out := slices.Clone(tpl)
	switch policy {
	case extensionsv1beta1.VolumeClaimTemplatesPolicyAllowed, extensionsv1beta1.VolumeClaimTemplatesPolicyOverrides:
	default:
		return nil, fmt.Errorf("%w: the template's volumeClaimTemplatesPolicy is %q; set it to Allowed or Overrides, or remove spec.volumeClaimTemplates from the claim",
			ErrVolumeClaimTemplates, orDefault(string(policy), string(extensionsv1beta1.VolumeClaimTemplatesPolicyDisallowed)))
	}
	for _, c := range claim {
		i := slices.IndexFunc(out, func(t agentsv1beta1.PersistentVolumeClaimTemplate) bool { return t.Name == c.Name })
		switch {
		case i < 0:
			out = append(out, c)
		case policy == extensionsv1beta1.VolumeClaimTemplatesPolicyOverrides:
			out[i] = c
		default:
			return nil, fmt.Errorf("%w: volume claim template %q is defined by the template and its policy Allowed forbids overriding it; rename it or set the policy to Overrides",
				ErrVolumeClaimTemplates, c.Name)
		}
	}
	return out, nil
}

func validateVCTs(owner string, vcts []agentsv1beta1.PersistentVolumeClaimTemplate) error {
	seen := map[string]bool{}
	for i, v := range vcts {
		if v.Name == "" {
			return fmt.Errorf("%w: the %s's volumeClaimTemplates[%d] has no metadata.name; give it one", ErrVolumeClaimTemplates, owner, i)
		}
		if seen[v.Name] {
			return fmt.Errorf("%w: the %s's volumeClaimTemplates name %q twice; names must be unique", ErrVolumeClaimTemplates, owner, v.Name)
		}
		seen[v.Name] = true
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
