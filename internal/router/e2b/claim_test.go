package e2b

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
)

func TestListQueryAndPaging(t *testing.T) {
	q := url.Values{"metadata": {"run=a+b&k=v"}, "state": {"running,paused"}, "limit": {"2"}}
	f, err := parseListQuery(q, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"run": "a b", "k": "v"}, f.metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if !f.matches(map[string]string{"run": "a b", "k": "v", "x": "y"}, e2bapi.StatePaused) || f.matches(map[string]string{"run": "a b"}, e2bapi.StateRunning) {
		t.Error("metadata filter must need every pair and allow extra keys")
	}
	all := []e2bapi.SandboxDetail{{SandboxID: "c"}, {SandboxID: "a"}, {SandboxID: "b"}}
	p1, next := page(all, detailID, f.pageBounds)
	if len(p1) != 2 || p1[0].SandboxID != "a" || p1[1].SandboxID != "b" || next != "b" {
		t.Fatalf("page 1 = %v, next %q", p1, next)
	}
	f.after = next
	p2, next := page(all, detailID, f.pageBounds)
	if len(p2) != 1 || p2[0].SandboxID != "c" || next != "" {
		t.Fatalf("page 2 = %v, next %q; want c and no next token", p2, next)
	}
	if v1, _ := parseListQuery(url.Values{}, true); len(v1.states) != 1 || v1.states[0] != e2bapi.StateRunning {
		t.Errorf("v1 list states %v, want running only", v1.states)
	}
	for _, bad := range []url.Values{{"state": {"gone"}}, {"limit": {"0"}}, {"limit": {"101"}}, {"nextToken": {"A-B"}}} {
		if _, err := parseListQuery(bad, false); err == nil {
			t.Errorf("parseListQuery(%v): want an error", bad)
		}
	}
}

func detailID(d e2bapi.SandboxDetail) string { return d.SandboxID }
