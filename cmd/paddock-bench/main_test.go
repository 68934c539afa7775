package main

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paddock-dev/paddock/internal/bench"
)

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"bin/paddock-bench", "--rate=20,50,burst", "--note", "2 cores, it's loaded", ""})
	want := `bin/paddock-bench --rate=20,50,burst --note '2 cores, it'\''s loaded' ''`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commandLine (-want +got):\n%s", diff)
	}
}

// TestFlagsRegister: the flags register on the process's command line, as main does. A package
// linked in that registers one of the same names there at init (controller-runtime's client
// config registers --kubeconfig) makes the binary panic before it parses a flag.
func TestFlagsRegister(t *testing.T) {
	fs := flag.CommandLine
	bench.NewOptions().AddFlags(fs)
	if fs.Lookup("kubeconfig") == nil || fs.Lookup("e2b") == nil {
		t.Fatal("AddFlags registered neither --kubeconfig nor --e2b")
	}
}
