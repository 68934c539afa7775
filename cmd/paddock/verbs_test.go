package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// run executes the root command in-process and returns stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("paddock %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func TestEveryVerbHasAnExample(t *testing.T) {
	root := newRootCommand()
	var walk func(c *cobra.Command)
	var verbs []string
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		// Groups (dev, pool) and cobra's own commands explain themselves through their children.
		if !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		if c.Parent() != nil && c.Parent().Name() == "dev" {
			return // the dev group predates the rule; its usage lines carry the examples
		}
		verbs = append(verbs, c.CommandPath())
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
	}
	walk(root)
	slices.Sort(verbs)
	want := []string{"paddock claim", "paddock cp", "paddock delete", "paddock e2b create-key", "paddock exec", "paddock get", "paddock ls", "paddock mcp",
		"paddock pool ls", "paddock pool scale", "paddock resume", "paddock run-code", "paddock suspend", "paddock uninstall"}
	if diff := cmp.Diff(want, verbs); diff != "" {
		t.Errorf("verbs (-want +got):\n%s", diff)
	}
}

func TestHelpShowsExamplesAndGlobalFlags(t *testing.T) {
	out := run(t, "exec", "--help")
	for _, want := range []string{"Examples:", "paddock exec my-agent -- python3", "--kubeconfig", "-n, --namespace", "-o, --output", "--router-url"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec --help lacks %q:\n%s", want, out)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := run(t, "completion", shell); !strings.Contains(out, "paddock") {
			t.Errorf("completion %s does not mention paddock:\n%.200s", shell, out)
		}
	}
	// Cobra's hidden __complete command is what the shell scripts call.
	out := run(t, "__complete", "ls", "-o", "")
	if got := strings.Fields(strings.Split(out, ":")[0]); !cmp.Equal(got, []string{"table", "json", "yaml"}) {
		t.Errorf("completing -o = %q, want table json yaml", out)
	}
	out = run(t, "__complete", "")
	for _, verb := range []string{"claim", "exec", "pool", "suspend"} {
		if !strings.Contains(out, verb+"\t") {
			t.Errorf("completing the verb lacks %s:\n%s", verb, out)
		}
	}
}
