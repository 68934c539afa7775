package framework

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// ReadExample decodes every object of a multi-document manifest under examples/, skipping empty
// documents.
func ReadExample(file string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(RepoRoot(), "examples", file)
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
