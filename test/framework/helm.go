package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is the Paddock Helm chart in the source tree.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "paddock") }

// HelmBinary returns the helm binary the Makefile builds from tools/go.mod: $PADDOCK_HELM, else
// bin/tools/helm in the source tree.
func HelmBinary() (string, error) {
	path := os.Getenv("PADDOCK_HELM")
	if path == "" {
		path = filepath.Join(RepoRoot(), "bin", "tools", "helm")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no helm binary at %s (set PADDOCK_HELM, or build it with `make %s`): %w", path, filepath.Join(RepoRoot(), "bin", "tools", "helm"), err)
	}
	return path, nil
}

// KustomizeBinary returns the kustomize binary the Makefile builds from tools/go.mod (the one
// that renders dist/): $PADDOCK_KUSTOMIZE, else bin/tools/kustomize in the source tree.
func KustomizeBinary() (string, error) {
	path := os.Getenv("PADDOCK_KUSTOMIZE")
	if path == "" {
		path = filepath.Join(RepoRoot(), "bin", "tools", "kustomize")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no kustomize binary at %s (set PADDOCK_KUSTOMIZE, or build it with `make %s`): %w", path, filepath.Join(RepoRoot(), "bin", "tools", "kustomize"), err)
	}
	return path, nil
}

// Helm runs helm with args in a scratch HOME, so no user configuration or cache leaks in, and
// returns its stdout. The error carries stderr.
func Helm(ctx context.Context, args ...string) (string, error) {
	bin, err := HelmBinary()
	if err != nil {
		return "", err
	}
	home, err := os.MkdirTemp("", "paddock-helm-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// DecodeManifests decodes every object of a multi-document YAML stream, skipping empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding document %d: %w", i, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Kustomize builds the kustomization in dir with the pinned kustomize and decodes its objects.
func Kustomize(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	bin, err := KustomizeBinary()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w\n%s", dir, err, stderr.String())
	}
	return DecodeManifests(stdout.Bytes())
}

// NamespaceRouterOverlay is the overlay docs/compatibility.md tells users to write to install
// config/namespace-router into ns, with base the path of config/namespace-router relative to the
// overlay's directory.
func NamespaceRouterOverlay(ns, base string) string {
	return fmt.Sprintf(`namespace: %[1]s
resources:
- %[2]s
patches:
- target: {kind: ClusterRoleBinding, name: paddock-router-auth-delegator-sandbox-tenant}
  patch: |-
    - op: replace
      path: /metadata/name
      value: paddock-router-auth-delegator-%[1]s
`, ns, base)
}

// BuildNamespaceRouter renders config/namespace-router into ns through NamespaceRouterOverlay.
func BuildNamespaceRouter(ctx context.Context, ns string) ([]*unstructured.Unstructured, error) {
	dir, err := os.MkdirTemp("", "namespace-router-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Rel(dir, filepath.Join(RepoRoot(), "config", "namespace-router"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(NamespaceRouterOverlay(ns, base)), 0o600); err != nil {
		return nil, err
	}
	return Kustomize(ctx, dir)
}
