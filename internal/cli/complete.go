package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// completeClaims completes the first argument with the names of the claims in the namespace.
// Completion must never print errors into the user's shell, so a failure completes nothing.
func completeClaims(g *Globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := g.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list := &extensionsv1beta1.SandboxClaimList{}
		if err := s.kube.List(cmd.Context(), list, client.InNamespace(s.namespace)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]cobra.Completion, 0, len(list.Items))
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completePools completes the first argument, or --pool, with the warm pools in the namespace.
func completePools(g *Globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && cmd.Name() == "scale" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := g.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list := &extensionsv1beta1.SandboxWarmPoolList{}
		if err := s.kube.List(cmd.Context(), list, client.InNamespace(s.namespace)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]cobra.Completion, 0, len(list.Items))
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeCopy completes cp's SRC and DST with "CLAIM:" for the claims whose names start with
// what was typed, so the sandbox side is one Tab away; anything else (a path with "/" or ":",
// or no matching claim) falls back to the shell's file completion.
func completeCopy(g *Globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= 2 || strings.ContainsAny(toComplete, "/:") || strings.HasPrefix(toComplete, ".") {
			return nil, cobra.ShellCompDirectiveDefault
		}
		claims, _ := completeClaims(g)(cmd, nil, toComplete)
		var out []cobra.Completion
		for _, c := range claims {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c+":")
			}
		}
		if len(out) == 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return out, cobra.ShellCompDirectiveNoSpace
	}
}
