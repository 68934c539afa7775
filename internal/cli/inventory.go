package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// UserObject is one object of a Paddock kind that deleting its CRD would delete with it.
type UserObject struct {
	Kind, Namespace, Name string
}

// userKinds are the kinds whose objects uninstall guards, in the order it reports them.
var userKinds = []string{"Sandbox", "SandboxClaim", "SandboxWarmPool", "SandboxTemplate", "SandboxSnapshot"}

// plural is the English plural of a kind name for messages: Sandbox -> Sandboxes.
func plural(kind string, n int) string {
	if n == 1 {
		return kind
	}
	if strings.HasSuffix(kind, "x") || strings.HasSuffix(kind, "s") {
		return kind + "es"
	}
	return kind + "s"
}

// Summary counts objects per kind, in userKinds order, e.g. "3 Sandboxes, 1 SandboxClaim".
// Kinds with no object are left out; no object at all gives "".
func Summary(objs []UserObject) string {
	counts := map[string]int{}
	for _, o := range objs {
		counts[o.Kind]++
	}
	var parts []string
	for _, k := range userKinds {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(k, n)))
		}
	}
	return strings.Join(parts, ", ")
}

// PrintUserObjects writes one KIND NAMESPACE NAME row per object.
func PrintUserObjects(w io.Writer, objs []UserObject) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME")
	for _, o := range objs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name)
	}
	return tw.Flush()
}

// ParseBundle decodes a multi-document install bundle into its objects, in file order, skipping
// empty documents. Every object must name its apiVersion, kind and name: uninstall deletes by them.
func ParseBundle(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding document %d of the install bundle: %w", i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d of the install bundle has no apiVersion, kind or metadata.name; regenerate it with make dist", i)
		}
		objs = append(objs, u)
	}
}

// describe names an object in progress lines: "Deployment paddock-system/paddock-controller".
func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}
