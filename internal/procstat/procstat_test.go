package procstat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	// A command name with a space and a ')' of its own, as a process may name itself.
	line := "4242 (my ) proc) S 1 4242 4242 0 -1 4194560 10 0 0 0 250 50 30 20 20 0 3 0 98765 1000 10\n"
	got, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{State: "S", User: 250, System: 50, ChildUser: 30, ChildSystem: 20, Start: 98765}
	if got != want {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}
	if got.CPU() != 3*time.Second || got.Reaped() != 500*time.Millisecond || !got.Running() {
		t.Errorf("CPU %v, Reaped %v, Running %v; want 3s, 500ms, true", got.CPU(), got.Reaped(), got.Running())
	}
	if z, _ := Parse([]byte(strings.Replace(line, ") S ", ") Z ", 1))); z.Running() {
		t.Error("a zombie is Running")
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for name, data := range map[string]string{
		"no command end": "12 (sh S 1 2 3",
		"short":          "12 (sh) S 1 2 3 4 5",
		"not a number":   "12 (sh) S 1 1 1 0 -1 0 0 0 0 0 x 1 0 0 20 0 1 0 5 0 0",
	} {
		if _, err := Parse([]byte(data)); err == nil || !strings.Contains(err.Error(), "malformed stat") {
			t.Errorf("%s: Parse(%q) error %v, want a malformed stat error", name, data, err)
		}
	}
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "7", "stat"), []byte("7 (sh) R 1 1 1 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 55 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(root, 7)
	if err != nil || got.Start != 55 || got.User != 1 || got.ChildSystem != 4 {
		t.Errorf("Read = %+v, %v", got, err)
	}
	if _, err := Read(root, 8); !os.IsNotExist(err) {
		t.Errorf("Read of a missing pid: %v, want not exist", err)
	}
	if got, err := Read("/proc", os.Getpid()); err != nil || !got.Running() || got.Start == 0 {
		t.Errorf("Read of this test's own process = %+v, %v", got, err)
	}
}
