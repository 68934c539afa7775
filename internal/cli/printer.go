// Package cli holds the paddock command's sandbox verbs (claim, ls, get, exec, cp, suspend, resume,
// delete, pool) and their pure pieces: output formats, --env parsing and table printing. The
// commands live here rather than in cmd/paddock so integration tests can run them in-process.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Output formats of -o.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// ParseOutput checks the value of -o/--output.
func ParseOutput(s string) (string, error) {
	switch s {
	case OutputTable, OutputJSON, OutputYAML:
		return s, nil
	}
	return "", fmt.Errorf("-o/--output %q: want one of table, json, yaml", s)
}

// ParseEnv turns repeated --env K=V values into the claim's environment, in flag order. A name
// given twice is an error rather than a silent override.
func ParseEnv(values []string) ([]extensionsv1beta1.EnvVar, error) {
	var env []extensionsv1beta1.EnvVar
	seen := map[string]bool{}
	for _, v := range values {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE, e.g. --env DEBUG=1", v)
		}
		if seen[name] {
			return nil, fmt.Errorf("--env %q: %s is set twice; give each name once", v, name)
		}
		seen[name] = true
		env = append(env, extensionsv1beta1.EnvVar{Name: name, Value: value})
	}
	return env, nil
}

// Table is rows under a header, printed with aligned columns.
type Table struct {
	Header []string
	Rows   [][]string
}

// Print writes the table with columns separated by at least three spaces.
func (t Table) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Print writes obj as JSON or YAML, or t when format is table.
func Print(w io.Writer, format string, obj any, t Table) error {
	switch format {
	case OutputJSON:
		data, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case OutputYAML:
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return t.Print(w)
}
