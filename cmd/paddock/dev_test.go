package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFindSourceDir(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module github.com/paddock-dev/paddock\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findSourceDir(deep)
	if err != nil || got != root {
		t.Fatalf("findSourceDir = %q, %v; want %q", got, err, root)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findSourceDir(other); err == nil || !strings.Contains(err.Error(), "--source-dir") {
		t.Fatalf("findSourceDir outside a checkout = %v, want an error pointing at --source-dir", err)
	}
}

func TestDevFlagsValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"dev", "up", "--kwok-nodes=-3", "--source-dir=/src"}, "--kwok-nodes -3 is out of range"},
		{[]string{"dev", "status", "--state-dir=/"}, "--state-dir must not be /"},
		{[]string{"dev", "up", "extra"}, `unknown command "extra"`},
		{[]string{"dev", "up", "--router-authz=open", "--source-dir=/src"}, `--router-authz="open" is not one of tokenreview, allow-all`},
		{[]string{"dev", "up", "--profile=open", "--source-dir=/src"}, `--profile="open" is not one of default, upstream-unauthenticated-migration`},
	}
	for _, tc := range cases {
		cmd := newRootCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("paddock %s = %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestDevGVisorFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true}, // gVisor is on unless turned off
		{[]string{"--gvisor=false"}, false},
	} {
		o := &devOptions{StateDir: "/var/lib/paddock-dev"}
		fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(append([]string{"--source-dir=/src"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.Config(true)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.GVisor != tc.want {
			t.Errorf("dev up %v: Config.GVisor = %v, want %v", tc.args, cfg.GVisor, tc.want)
		}
	}
}

// TestDevProfileWarns: the migration profile is accepted with a warning that says what it opens.
func TestDevProfileWarns(t *testing.T) {
	for profile, warns := range map[string]bool{"default": false, "upstream-unauthenticated-migration": true} {
		o := &devOptions{Profile: profile}
		var out strings.Builder
		if err := o.validateProfile(&out); err != nil {
			t.Fatalf("--profile=%s: %v", profile, err)
		}
		if got := strings.Contains(out.String(), "WARNING") && strings.Contains(out.String(), "without a token"); got != warns {
			t.Errorf("--profile=%s warned %q, want a warning %v", profile, out.String(), warns)
		}
	}
}
