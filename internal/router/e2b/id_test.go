package e2b

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestNewIDIsDNSSafeAndShort(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !IsID(id) || len(id) != idLength || seen[id] {
			t.Fatalf("NewID() = %q: want %d fresh characters of [a-z0-9]", id, idLength)
		}
		seen[id] = true
	}
}

func TestTargetFromHost(t *testing.T) {
	cases := []struct {
		host, domain string
		want         DataTarget
		ok           bool
	}{
		{"49983-abc123.e2b.example", "e2b.example", DataTarget{ID: "abc123", Port: 49983}, true},
		{"8080-abc123.E2B.example:443", "e2b.example", DataTarget{ID: "abc123", Port: 8080}, true},
		{"8080-abc123.e2b.example.", "e2b.example", DataTarget{ID: "abc123", Port: 8080}, true},
		{"8080-abc123.other.example", "e2b.example", DataTarget{}, false},
		{"8080-abc123.e2b.example", "", DataTarget{}, false},
		{"08080-abc123.e2b.example", "e2b.example", DataTarget{}, false},
		{"70000-abc123.e2b.example", "e2b.example", DataTarget{}, false},
		{"8080-ab-c.e2b.example", "e2b.example", DataTarget{}, false},
		{"8080-ABC.e2b.example", "e2b.example", DataTarget{ID: "abc", Port: 8080}, true},
		{"api.e2b.example", "e2b.example", DataTarget{}, false},
		{"127.0.0.1:3000", "e2b.example", DataTarget{}, false},
	}
	for _, c := range cases {
		got, ok := TargetFromHost(c.host, c.domain)
		if ok != c.ok || got != c.want {
			t.Errorf("TargetFromHost(%q, %q) = %+v, %v; want %+v, %v", c.host, c.domain, got, ok, c.want, c.ok)
		}
	}
}

func TestTargetFromHeaders(t *testing.T) {
	if _, ok, err := TargetFromHeaders("", "49983"); ok || err != nil {
		t.Errorf("no id: ok=%v err=%v, want not a data-plane request", ok, err)
	}
	if got, ok, err := TargetFromHeaders("abc", ""); !ok || err != nil || got != (DataTarget{ID: "abc", Port: EnvdPort}) {
		t.Errorf("id only = %+v %v %v, want the daemon port", got, ok, err)
	}
	for _, bad := range [][2]string{{"a-b", "1"}, {"abc", "0"}, {"abc", "x"}, {strings.Repeat("a", 58), "1"}} {
		if _, ok, err := TargetFromHeaders(bad[0], bad[1]); !ok || err == nil {
			t.Errorf("TargetFromHeaders(%q, %q): want an error", bad[0], bad[1])
		}
	}
}

func TestNewClaimCarriesTheRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	req := &CreateRequest{Metadata: map[string]string{"run": "a b", "k/x": "v=1"}, EnvVars: map[string]string{"B": "2", "A": "1"}}
	c, err := newClaim("ns", "abc", "pool", "base", req, 120*time.Second, lifecycleOptions{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "abc" || c.Namespace != "ns" || c.Labels[SandboxLabel] != "true" || c.Spec.WarmPoolRef.Name != "pool" {
		t.Errorf("claim %s/%s labels %v pool %q", c.Namespace, c.Name, c.Labels, c.Spec.WarmPoolRef.Name)
	}
	if diff := cmp.Diff(req.Metadata, metadataOf(c)); diff != "" {
		t.Errorf("metadata round trip (-want +got):\n%s", diff)
	}
	if got := []string{c.Spec.Env[0].Name, c.Spec.Env[1].Name}; got[0] != "A" || got[1] != "B" {
		t.Errorf("env order %v, want sorted", got)
	}
	if got := c.Spec.Lifecycle.ShutdownTime.Time; !got.Equal(time.Date(2026, 12, 1, 10, 2, 0, 0, time.UTC)) {
		t.Errorf("shutdownTime %s, want now+120s", got)
	}
	d := detailOf(c, nil)
	if d.EndAt != "2026-12-01T10:02:00Z" || d.State != StateRunning || d.TemplateID != "base" {
		t.Errorf("detail %+v", d)
	}
}

func TestListQueryAndPaging(t *testing.T) {
	q := url.Values{"metadata": {"run=a+b&k=v"}, "state": {"running,paused"}, "limit": {"2"}}
	f, err := parseListQuery(q, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"run": "a b", "k": "v"}, f.metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if !f.matches(map[string]string{"run": "a b", "k": "v", "x": "y"}, StatePaused) || f.matches(map[string]string{"run": "a b"}, StateRunning) {
		t.Error("metadata filter must need every pair and allow extra keys")
	}
	all := []SandboxDetail{{SandboxID: "c"}, {SandboxID: "a"}, {SandboxID: "b"}}
	p1, next := page(all, f)
	if len(p1) != 2 || p1[0].SandboxID != "a" || p1[1].SandboxID != "b" || next != "b" {
		t.Fatalf("page 1 = %v, next %q", p1, next)
	}
	f.after = next
	p2, next := page(all, f)
	if len(p2) != 1 || p2[0].SandboxID != "c" || next != "" {
		t.Fatalf("page 2 = %v, next %q; want c and no next token", p2, next)
	}
	if v1, _ := parseListQuery(url.Values{}, true); len(v1.states) != 1 || v1.states[0] != StateRunning {
		t.Errorf("v1 list states %v, want running only", v1.states)
	}
	for _, bad := range []url.Values{{"state": {"gone"}}, {"limit": {"0"}}, {"limit": {"101"}}, {"nextToken": {"A-B"}}} {
		if _, err := parseListQuery(bad, false); err == nil {
			t.Errorf("parseListQuery(%v): want an error", bad)
		}
	}
}

func TestAutoPauseMakesTheTimeoutAnIdleTimeout(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	on, off := true, false
	for _, tc := range []struct {
		name       string
		req        CreateRequest
		wantPause  bool
		wantResume bool
	}{
		{name: "no lifecycle: kill at the timeout", req: CreateRequest{}},
		{name: "autoPause false: kill", req: CreateRequest{AutoPause: &off}},
		{name: "autoPause", req: CreateRequest{AutoPause: &on, AutoPauseMemory: &on}, wantPause: true},
		{name: "autoPause and autoResume", req: CreateRequest{AutoPause: &on, AutoResume: &AutoResumeOptions{Enabled: &on}}, wantPause: true, wantResume: true},
		{name: "autoPause, autoResume disabled", req: CreateRequest{AutoPause: &on, AutoResume: &AutoResumeOptions{Enabled: &off}}, wantPause: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			life, err := lifecycleOf(&tc.req)
			if err != nil {
				t.Fatal(err)
			}
			c, err := newClaim("ns", "abc", "pool", "base", &tc.req, 90*time.Second, life, now)
			if err != nil {
				t.Fatal(err)
			}
			c.CreationTimestamp = metav1.NewTime(now)
			d := detailOf(c, nil)
			if !tc.wantPause {
				if c.Spec.Lifecycle == nil || c.Spec.Lifecycle.ShutdownPolicy != extensionsv1beta1.ShutdownPolicyDelete || pausesOnTimeout(c) {
					t.Errorf("lifecycle %+v annotations %v; want an expiry that deletes and no idle policy", c.Spec.Lifecycle, c.Annotations)
				}
				if d.Lifecycle == nil || d.Lifecycle.OnTimeout != onTimeoutKill {
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
			if d.Lifecycle == nil || d.Lifecycle.OnTimeout != onTimeoutPause || d.Lifecycle.AutoResume != tc.wantResume {
				t.Errorf("detail lifecycle %+v, want onTimeout pause, autoResume %v", d.Lifecycle, tc.wantResume)
			}
			if d.EndAt != "2026-12-01T10:01:30Z" {
				t.Errorf("endAt %s, want the creation plus the timeout while nothing was recorded", d.EndAt)
			}
		})
	}
	if _, err := lifecycleOf(&CreateRequest{AutoResume: &AutoResumeOptions{Enabled: &on}}); err == nil || !strings.Contains(err.Error(), "autoPause") {
		t.Errorf("autoResume without autoPause: %v; want an error naming autoPause", err)
	}
}
