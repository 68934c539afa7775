package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadExample decodes every object of a multi-document manifest under examples/, skipping empty
// documents.
func ReadExample(file string) ([]*unstructured.Unstructured, error) {
	return readManifest(filepath.Join(RepoRoot(), "examples", file))
}

// InstallAdmissionPolicy creates the objects of config/admission/<file>, the file the bundles
// and the chart ship. With namespace set, its ValidatingAdmissionPolicyBinding is renamed for
// that namespace, applies only there and goes when the test ends: for tiers whose other tests
// make objects the policy refuses, on purpose.
func InstallAdmissionPolicy(t testing.TB, ctx context.Context, c client.Client, file, namespace string) {
	t.Helper()
	objs, err := readManifest(filepath.Join(RepoRoot(), "config", "admission", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if namespace != "" && u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			u.SetName(u.GetName() + "-" + namespace)
			if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"kubernetes.io/metadata.name": namespace},
				"spec", "matchResources", "namespaceSelector", "matchLabels"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), u) })
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s from config/admission/%s: %v", u.GetKind(), u.GetName(), file, err)
		}
	}
}

func readManifest(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
