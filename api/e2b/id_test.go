package e2b

import (
	"strings"
	"testing"
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

func TestNewAPIKeyIsPrefixedAndFresh(t *testing.T) {
	a, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, APIKeyPrefix) || len(a) != len(APIKeyPrefix)+48 || a == b {
		t.Fatalf("NewAPIKey() = %q then %q: want %s and 48 fresh hex digits each time", a, b, APIKeyPrefix)
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
