package e2b

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

func TestParseSnapshotName(t *testing.T) {
	for _, c := range []struct {
		name, object string
	}{
		{"my-snap", "my-snap--default"},
		{"my-snap:v2", "my-snap--v2"},
		{"team-a/my-snap:v2", "my-snap--v2"},
		{"abc123:default", "abc123--default"},
	} {
		ref, err := parseSnapshotName(c.name, "team-a")
		if err != nil || ref.objectName() != c.object {
			t.Errorf("parseSnapshotName(%q) = %q, %v; want %q", c.name, ref.objectName(), err, c.object)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"team-b/my-snap", `namespace "team-a", not "team-b"`},
		{"My-Snap", "lower-case"},
		{"a--b", "single '-'"},
		{"snap:v1.2", `tag "v1.2"`},
		{"snap:", `tag ""`},
		{"team-a/b/c", "lower-case"},
		{strings.Repeat("a", 60) + ":tag", "shorten them"},
	} {
		if _, err := parseSnapshotName(c.name, "team-a"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "name ") {
			t.Errorf("parseSnapshotName(%q) error %v; want one naming the field and saying %q", c.name, err, c.want)
		}
	}
	// Every accepted name keeps the pool's members DNS labels.
	if _, err := parseSnapshotName(strings.Repeat("a", maxSnapshotName-2-7)+":default", "team-a"); err != nil {
		t.Errorf("the longest name: %v", err)
	}
}

func TestSnapshotIDs(t *testing.T) {
	named := &snapshotsv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{
		e2bapi.SnapshotAliasLabel: "my-snap", e2bapi.SnapshotTagLabel: "v2", e2bapi.SnapshotNamedLabel: "true"}}}
	unnamed := &snapshotsv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{
		e2bapi.SnapshotAliasLabel: "abc123", e2bapi.SnapshotTagLabel: "default"}}}
	if d := cmp.Diff(e2bapi.SnapshotInfo{SnapshotID: "team-a/my-snap:v2", Names: []string{"team-a/my-snap"}}, snapshotInfo(named)); d != "" {
		t.Errorf("named (-want +got):\n%s", d)
	}
	if d := cmp.Diff(e2bapi.SnapshotInfo{SnapshotID: "abc123:default", Names: []string{}}, snapshotInfo(unnamed)); d != "" {
		t.Errorf("unnamed (-want +got):\n%s", d)
	}
	// Each ID the front door hands out leads back to its object; another namespace's does not.
	for _, id := range []string{"team-a/my-snap:v2", "abc123:default"} {
		if ref, ok := parseSnapshotID(id, "team-a"); !ok || !isSnapshotID(id) {
			t.Errorf("parseSnapshotID(%q) = %v, %v", id, ref, ok)
		}
	}
	if _, ok := parseSnapshotID("team-a/my-snap:v2", "team-b"); ok {
		t.Error("another namespace's snapshot ID must name nothing")
	}
	if !isSnapshotObjectName("my-snap--v2") || isSnapshotObjectName("my-snap") || isSnapshotObjectName("A--b") {
		t.Error("isSnapshotObjectName must take alias--tag only")
	}
	if isSnapshotID("base") {
		t.Error("a plain template ID is not only a snapshot's")
	}
	for _, c := range []struct{ name, alias, tag string }{{"", "", ""}, {"snap", "snap", ""}, {"snap:v2", "snap", "v2"}, {"team-a/snap", "snap", ""}} {
		alias, tag, ok := parseSnapshotFilter(c.name, "team-a")
		if !ok || alias != c.alias || tag != c.tag {
			t.Errorf("parseSnapshotFilter(%q) = %q %q %v; want %q %q", c.name, alias, tag, ok, c.alias, c.tag)
		}
	}
	if _, _, ok := parseSnapshotFilter("team-b/snap", "team-a"); ok {
		t.Error("another namespace's name filter must match nothing")
	}
}

func TestParseFork(t *testing.T) {
	count, lifetime, err := parseFork(e2bapi.ForkRequest{})
	if err != nil || count != 1 || lifetime != e2bapi.DefaultForkTimeoutSeconds*time.Second {
		t.Errorf("parseFork({}) = %d, %s, %v; want 1 fork of %ds", count, lifetime, err, e2bapi.DefaultForkTimeoutSeconds)
	}
	count, lifetime, err = parseFork(e2bapi.ForkRequest{Count: ptr.To[int64](7), Timeout: ptr.To[int64](30)})
	if err != nil || count != 7 || lifetime != 30*time.Second {
		t.Errorf("parseFork(7, 30) = %d, %s, %v", count, lifetime, err)
	}
	for _, c := range []struct {
		body  e2bapi.ForkRequest
		field string
	}{
		{e2bapi.ForkRequest{Count: ptr.To[int64](0)}, "count"},
		{e2bapi.ForkRequest{Count: ptr.To[int64](101)}, "count"},
		{e2bapi.ForkRequest{Timeout: ptr.To[int64](0)}, "timeout"},
		{e2bapi.ForkRequest{Timeout: ptr.To[int64](-1)}, "timeout"},
	} {
		if _, _, err := parseFork(c.body); err == nil || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("parseFork(%+v) error %v; want one naming %s", c.body, err, c.field)
		}
	}
}

// TestForkRequest: a fork keeps its source's template ID, metadata, envs, egress policy and
// resources, and nothing else of the claim (not its autoPause, not its expiry).
func TestForkRequest(t *testing.T) {
	src := &extensionsv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "src", Annotations: map[string]string{
			e2bapi.TemplateAnnotation: "base", e2bapi.MetadataAnnotation: `{"run":"1"}`, egress.PolicyAnnotation: `{"deny":["0.0.0.0/0"]}`,
			extensionsv1beta1.CPUAnnotation: "2", "unrelated.example/key": "x"}},
		Spec: extensionsv1beta1.SandboxClaimSpec{Env: []extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}}},
	}
	c := newClaim("ns", "fork1", "pool", forkRequest(src, 20*time.Second), time.Unix(1000, 0))
	want := map[string]string{e2bapi.TemplateAnnotation: "base", e2bapi.MetadataAnnotation: `{"run":"1"}`,
		egress.PolicyAnnotation: `{"deny":["0.0.0.0/0"]}`, extensionsv1beta1.CPUAnnotation: "2"}
	if d := cmp.Diff(want, c.Annotations); d != "" {
		t.Errorf("fork annotations (-want +got):\n%s", d)
	}
	if len(c.Spec.Env) != 1 || c.Spec.WarmPoolRef.Name != "pool" || c.Spec.Lifecycle == nil || !c.Spec.Lifecycle.ShutdownTime.Time.Equal(time.Unix(1020, 0)) {
		t.Errorf("fork claim spec %+v; want the source's env, the snapshot's pool and an expiry 20s on", c.Spec)
	}
}

// TestSnapshotsMissing: without the SandboxSnapshot CRD (a chart upgrade adds no CRDs) the front
// door starts and says why the snapshot calls are not served, naming the fix.
func TestSnapshotsMissing(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	why, err := snapshotsMissing(mapper)
	if err != nil || !strings.Contains(why, "SandboxSnapshot CRD") || !strings.Contains(why, "kubectl apply") {
		t.Errorf("without the CRD: %q, %v; want a reason naming the CRD and the fix", why, err)
	}
	mapper.Add(snapshotsv1alpha1.GroupVersion.WithKind("SandboxSnapshot"), meta.RESTScopeNamespace)
	if why, err := snapshotsMissing(mapper); why != "" || err != nil {
		t.Errorf("with the CRD: %q, %v; want served", why, err)
	}
}
