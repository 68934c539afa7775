package e2b

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	c, err := newClaim("ns", "abc", "pool", "base", req, 120*time.Second, now)
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
