package e2b

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestNewClaimCarriesTheRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	body := e2bapi.CreateRequest{Timeout: ptr.To[int64](120),
		Metadata: map[string]string{"run": "a b", "k/x": "v=1"}, EnvVars: map[string]string{"B": "2", "A": "1"}}
	req, err := parseCreate(body)
	if err != nil {
		t.Fatal(err)
	}
	c := newClaim("ns", "abc", "pool", req, now)
	if c.Name != "abc" || c.Namespace != "ns" || c.Labels[e2bapi.SandboxLabel] != "true" || c.Spec.WarmPoolRef.Name != "pool" {
		t.Errorf("claim %s/%s labels %v pool %q", c.Namespace, c.Name, c.Labels, c.Spec.WarmPoolRef.Name)
	}
	if diff := cmp.Diff(body.Metadata, metadataOf(c)); diff != "" {
		t.Errorf("metadata round trip (-want +got):\n%s", diff)
	}
	if got := []string{c.Spec.Env[0].Name, c.Spec.Env[1].Name}; got[0] != "A" || got[1] != "B" {
		t.Errorf("env order %v, want sorted", got)
	}
	if got := c.Spec.Lifecycle.ShutdownTime.Time; !got.Equal(time.Date(2026, 12, 1, 10, 2, 0, 0, time.UTC)) {
		t.Errorf("shutdownTime %s, want now+120s", got)
	}
	d := detailOf(c, nil)
	if d.EndAt != "2026-12-01T10:02:00Z" || d.State != e2bapi.StateRunning || d.TemplateID != e2bapi.DefaultTemplate {
		t.Errorf("detail %+v", d)
	}
}

// TestParseCreateRefusesWithTheField: a create body the front door cannot serve is refused
// before any API call, with an error naming the field to fix.
func TestParseCreateRefusesWithTheField(t *testing.T) {
	on := true
	for _, tc := range []struct {
		name  string
		body  e2bapi.CreateRequest
		field string
	}{
		{"negative timeout", e2bapi.CreateRequest{Timeout: ptr.To[int64](-1)}, "timeout"},
		{"timeout beyond the bound", e2bapi.CreateRequest{Timeout: ptr.To[int64](maxTimeoutSeconds + 1)}, "timeout"},
		{"autoResume without autoPause", e2bapi.CreateRequest{AutoResume: &e2bapi.AutoResumeOptions{Enabled: &on}}, "autoPause"},
		{"unnamed env var", e2bapi.CreateRequest{EnvVars: map[string]string{"": "x"}}, "envVars"},
		{"cpu not a quantity", e2bapi.CreateRequest{Metadata: map[string]string{"paddock.dev/cpu": "fast"}}, "metadata: metadata.annotations[paddock.dev/cpu]: fast is not a quantity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseCreate(tc.body); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("parseCreate: %v; want an error naming %s", err, tc.field)
			}
		})
	}
}

func TestAutoPauseMakesTheTimeoutAnIdleTimeout(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	on, off := true, false
	for _, tc := range []struct {
		name       string
		req        e2bapi.CreateRequest
		wantPause  bool
		wantResume bool
	}{
		{name: "no lifecycle: kill at the timeout", req: e2bapi.CreateRequest{}},
		{name: "autoPause false: kill", req: e2bapi.CreateRequest{AutoPause: &off}},
		{name: "autoPause", req: e2bapi.CreateRequest{AutoPause: &on, AutoPauseMemory: &on}, wantPause: true},
		{name: "autoPause and autoResume", req: e2bapi.CreateRequest{AutoPause: &on, AutoResume: &e2bapi.AutoResumeOptions{Enabled: &on}}, wantPause: true, wantResume: true},
		{name: "autoPause, autoResume disabled", req: e2bapi.CreateRequest{AutoPause: &on, AutoResume: &e2bapi.AutoResumeOptions{Enabled: &off}}, wantPause: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Timeout = ptr.To[int64](90)
			req, err := parseCreate(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			c := newClaim("ns", "abc", "pool", req, now)
			c.CreationTimestamp = metav1.NewTime(now)
			d := detailOf(c, nil)
			if !tc.wantPause {
				if c.Spec.Lifecycle == nil || c.Spec.Lifecycle.ShutdownPolicy != extensionsv1beta1.ShutdownPolicyDelete || pausesOnTimeout(c) {
					t.Errorf("lifecycle %+v annotations %v; want an expiry that deletes and no idle policy", c.Spec.Lifecycle, c.Annotations)
				}
				if d.Lifecycle == nil || d.Lifecycle.OnTimeout != e2bapi.OnTimeoutKill {
					t.Errorf("detail lifecycle %+v, want onTimeout kill", d.Lifecycle)
				}
				return
			}
			if c.Spec.Lifecycle != nil {
				t.Errorf("an autoPause claim has an expiry %+v; it must never be deleted by its timeout", c.Spec.Lifecycle)
			}
			if got := c.Annotations[agentsv1beta1.IdleTimeoutAnnotation]; got != "1m30s" {
				t.Errorf("idle timeout %q, want the sandbox timeout 1m30s", got)
			}
			if got := c.Annotations[agentsv1beta1.WakeOnRequestAnnotation]; got != strconv.FormatBool(tc.wantResume) {
				t.Errorf("wake-on-request %q, want %v (autoResume)", got, tc.wantResume)
			}
			if d.Lifecycle == nil || d.Lifecycle.OnTimeout != e2bapi.OnTimeoutPause || d.Lifecycle.AutoResume != tc.wantResume {
				t.Errorf("detail lifecycle %+v, want onTimeout pause, autoResume %v", d.Lifecycle, tc.wantResume)
			}
			if d.EndAt != "2026-12-01T10:01:30Z" {
				t.Errorf("endAt %s, want the creation plus the timeout while nothing was recorded", d.EndAt)
			}
		})
	}
}

// TestCreateChoosesResourcesThroughMetadata: the metadata keys paddock.dev/cpu and memory become
// the claim's annotations, which its pool's bounds and the in-place resize act on; other metadata
// stays metadata only.
func TestCreateChoosesResourcesThroughMetadata(t *testing.T) {
	req, err := parseCreate(e2bapi.CreateRequest{Metadata: map[string]string{"paddock.dev/cpu": "2", "paddock.dev/memory": "1Gi", "run": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	c := newClaim("ns", "abc", "pool", req, time.Now())
	if c.Annotations[extensionsv1beta1.CPUAnnotation] != "2" || c.Annotations[extensionsv1beta1.MemoryAnnotation] != "1Gi" {
		t.Errorf("claim annotations %v lack the chosen resources", c.Annotations)
	}
	if _, ok := c.Annotations["run"]; ok {
		t.Errorf("plain metadata became an annotation: %v", c.Annotations)
	}
}
