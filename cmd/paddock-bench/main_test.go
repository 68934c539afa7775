package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"bin/paddock-bench", "--rate=20,50,burst", "--note", "2 cores, it's loaded", ""})
	want := `bin/paddock-bench --rate=20,50,burst --note '2 cores, it'\''s loaded' ''`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commandLine (-want +got):\n%s", diff)
	}
}
