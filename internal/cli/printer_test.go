package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestParseOutput(t *testing.T) {
	for _, ok := range []string{"table", "json", "yaml"} {
		if got, err := ParseOutput(ok); err != nil || got != ok {
			t.Errorf("ParseOutput(%q) = %q, %v; want it back", ok, got, err)
		}
	}
	_, err := ParseOutput("wide")
	if err == nil || !strings.Contains(err.Error(), `-o/--output "wide"`) {
		t.Errorf("ParseOutput(wide) = %v, want an error naming -o/--output and the value", err)
	}
}

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []extensionsv1beta1.EnvVar
		wantErr string
	}{
		{name: "none"},
		{name: "in order, values may hold =", in: []string{"B=2", "A=x=y", "EMPTY="},
			want: []extensionsv1beta1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "x=y"}, {Name: "EMPTY"}}},
		{name: "no =", in: []string{"DEBUG"}, wantErr: `--env "DEBUG": want NAME=VALUE`},
		{name: "no name", in: []string{"=1"}, wantErr: `--env "=1": want NAME=VALUE`},
		{name: "twice", in: []string{"A=1", "A=2"}, wantErr: `--env "A=2": A is set twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func claim(name string, created time.Duration, ready metav1.ConditionStatus, reason, sandbox string) extensionsv1beta1.SandboxClaim {
	c := extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
	c.Spec.WarmPoolRef.Name = "python"
	c.Status.Sandbox.Name = sandbox
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: extensionsv1beta1.ClaimConditionReady, Status: ready, Reason: reason}}
	}
	return c
}

func TestClaimTable(t *testing.T) {
	got := ClaimTable([]extensionsv1beta1.SandboxClaim{
		claim("a", 90*time.Second, metav1.ConditionTrue, "Ready", "python-abc"),
		claim("b", 3*time.Hour, metav1.ConditionFalse, "WarmPoolNotFound", ""),
		claim("c", 0, "", "", ""),
	}, now)
	want := Table{Header: []string{"NAME", "POOL", "READY", "SANDBOX", "REASON", "AGE"}, Rows: [][]string{
		{"a", "python", "True", "python-abc", "Ready", "90s"},
		{"b", "python", "False", "-", "WarmPoolNotFound", "3h"},
		{"c", "python", "Unknown", "-", "-", "0s"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPoolTable(t *testing.T) {
	p := func(name string, replicas *int32, current, ready int32) extensionsv1beta1.SandboxWarmPool {
		pool := extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))}}
		pool.Spec.Replicas, pool.Spec.TemplateRef.Name = replicas, "tpl"
		pool.Status.Replicas, pool.Status.ReadyReplicas = current, ready
		return pool
	}
	got := PoolTable([]extensionsv1beta1.SandboxWarmPool{p("set", ptr.To[int32](3), 2, 1), p("unset", nil, 0, 0)}, now)
	want := Table{Header: []string{"NAME", "TEMPLATE", "DESIRED", "CURRENT", "READY", "AGE"}, Rows: [][]string{
		{"set", "tpl", "3", "2", "1", "2m"},
		{"unset", "tpl", "1", "0", "0", "2m"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPrint(t *testing.T) {
	obj := struct {
		Claim string `json:"claim"`
		Count int    `json:"count"`
	}{"a", 1}
	tbl := Table{Header: []string{"CLAIM", "N"}, Rows: [][]string{{"a-long-name", "1"}}}
	tests := map[string]string{
		OutputTable: "CLAIM         N\na-long-name   1\n",
		OutputJSON:  "{\n  \"claim\": \"a\",\n  \"count\": 1\n}\n",
		OutputYAML:  "claim: a\ncount: 1\n",
	}
	for format, want := range tests {
		var buf bytes.Buffer
		if err := Print(&buf, format, obj, tbl); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if diff := cmp.Diff(want, buf.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", format, diff)
		}
	}
}
