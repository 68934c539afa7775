package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
)

// defaultTimeout bounds the verbs that wait for a claim or sandbox to change.
const defaultTimeout = 2 * time.Minute

type claimOptions struct {
	Pool    string
	Name    string
	Env     []string
	Timeout time.Duration
}

func newClaimCommand(g *Globals) *cobra.Command {
	o := &claimOptions{}
	cmd := &cobra.Command{
		Use:   "claim --pool NAME",
		Short: "Claim a sandbox from a warm pool and wait until it is Ready",
		Example: `  # Claim from the pool "python" in the current namespace
  paddock claim --pool python

  # Name the claim, pass environment variables, wait at most 30 seconds
  paddock claim --pool python --name my-agent --env DEBUG=1 --env MODE=fast --timeout 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runClaim(cmd, g, o) },
	}
	cmd.Flags().StringVar(&o.Pool, "pool", "", "SandboxWarmPool to claim from (required)")
	cmd.Flags().StringVar(&o.Name, "name", "", "name of the claim (default: the pool name and a random suffix)")
	cmd.Flags().StringArrayVar(&o.Env, "env", nil, "NAME=VALUE environment variable for the sandbox; repeat for more")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", defaultTimeout, "how long to wait for the claim to be Ready")
	_ = cmd.RegisterFlagCompletionFunc("pool", completePools(g)) // fails only for an unknown flag
	return cmd
}

func runClaim(cmd *cobra.Command, g *Globals, o *claimOptions) error {
	if o.Pool == "" {
		return fmt.Errorf("--pool is required: name the SandboxWarmPool to claim from (paddock pool ls lists them)")
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive, e.g. --timeout 2m", o.Timeout)
	}
	env, err := ParseEnv(o.Env)
	if err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	// The CLI picks the name itself so the progress line can name the claim before it exists.
	name := o.Name
	if name == "" {
		name = o.Pool + "-" + utilrand.String(5)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
	defer cancel()
	fmt.Fprintf(cmd.ErrOrStderr(), "waiting for claim %s to be Ready...\n", name)
	start := time.Now()
	sb, err := s.sdk.Claim(ctx, sdk.ClaimOptions{WarmPool: o.Pool, Namespace: s.namespace, Name: name, Env: env})
	if err != nil {
		return err
	}
	latency := time.Since(start)
	ip := "-"
	if ips := sb.PodIPs(); len(ips) > 0 {
		ip = ips[0]
	}
	out := struct {
		Claim     string `json:"claim"`
		Namespace string `json:"namespace"`
		Sandbox   string `json:"sandbox"`
		PodIP     string `json:"podIP"`
		Latency   string `json:"latency"`
	}{sb.ClaimName(), sb.Namespace(), sb.SandboxName(), ip, latency.Round(time.Millisecond).String()}
	t := Table{Header: []string{"CLAIM", "SANDBOX", "IP", "LATENCY"}, Rows: [][]string{{out.Claim, out.Sandbox, out.PodIP, out.Latency}}}
	return Print(cmd.OutOrStdout(), g.Output, out, t)
}

func newListCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandbox claims with their readiness, sandbox and age",
		Example: `  paddock ls
  paddock ls -n agents -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.connect()
			if err != nil {
				return err
			}
			list := &extensionsv1beta1.SandboxClaimList{}
			if err := s.kube.List(cmd.Context(), list, client.InNamespace(s.namespace)); err != nil {
				return fmt.Errorf("listing claims in namespace %q: %w", s.namespace, err)
			}
			return Print(cmd.OutOrStdout(), g.Output, list, ClaimTable(list.Items, time.Now()))
		},
	}
}

func newGetCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:               "get CLAIM",
		ValidArgsFunction: completeClaims(g),
		Short:             "Show one sandbox claim",
		Example: `  paddock get my-agent
  paddock get my-agent -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.connect()
			if err != nil {
				return err
			}
			claim, err := s.getClaim(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return Print(cmd.OutOrStdout(), g.Output, claim, ClaimTable([]extensionsv1beta1.SandboxClaim{*claim}, time.Now()))
		},
	}
}

// getClaim reads a claim, saying plainly when it does not exist.
func (s *session) getClaim(ctx context.Context, name string) (*extensionsv1beta1.SandboxClaim, error) {
	claim := &extensionsv1beta1.SandboxClaim{}
	err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, claim)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("claim %q not found in namespace %q (paddock ls lists the claims)", name, s.namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading claim %q in namespace %q: %w", name, s.namespace, err)
	}
	return claim, nil
}

// attach checks that the claim exists, then waits through the SDK until it is Ready.
func (s *session) attach(ctx context.Context, name string) (*sdk.Sandbox, error) {
	if _, err := s.getClaim(ctx, name); err != nil {
		return nil, err
	}
	return s.sdk.Attach(ctx, s.namespace, name)
}

// claimSession connects, bounds what follows by timeout and checks that the claim exists, for
// the verbs that act on one claim and wait for it.
func (g *Globals) claimSession(ctx context.Context, claim string, timeout time.Duration) (context.Context, context.CancelFunc, *session, error) {
	s, err := g.connect()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	if _, err := s.getClaim(ctx, claim); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, s, nil
}

func newSuspendCommand(g *Globals) *cobra.Command {
	return claimWaitCommand(g, &cobra.Command{
		Use:     "suspend CLAIM",
		Short:   "Suspend a claim's sandbox: its Pod is deleted, storage and Service are kept",
		Example: `  paddock suspend my-agent`,
	}, "the sandbox to be Suspended", func(ctx context.Context, cmd *cobra.Command, s *session, claim string) error {
		// Lookup, not Attach: a claim need not be Ready to be suspended.
		sb, err := s.sdk.Lookup(ctx, s.namespace, claim)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "waiting for sandbox %s to be Suspended...\n", sb.SandboxName())
		if err := sb.Suspend(ctx); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "claim %s suspended (sandbox %s)\n", claim, sb.SandboxName())
		return nil
	})
}

func newResumeCommand(g *Globals) *cobra.Command {
	return claimWaitCommand(g, &cobra.Command{
		Use:     "resume CLAIM",
		Short:   "Resume a suspended claim's sandbox and wait until it is Ready",
		Example: `  paddock resume my-agent`,
	}, "the claim to be Ready again", func(ctx context.Context, cmd *cobra.Command, s *session, claim string) error {
		fmt.Fprintf(cmd.ErrOrStderr(), "waiting for claim %s to be Ready...\n", claim)
		sb, err := s.sdk.Resume(ctx, s.namespace, claim)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "claim %s resumed (sandbox %s, pod IP %v)\n", claim, sb.SandboxName(), sb.PodIPs())
		return nil
	})
}

// claimWaitCommand completes cmd into a verb on one existing claim that waits, under --timeout,
// for what waitsFor says: run gets the bounded context and the claim's session (claimSession).
func claimWaitCommand(g *Globals, cmd *cobra.Command, waitsFor string,
	run func(ctx context.Context, cmd *cobra.Command, s *session, claim string) error) *cobra.Command {
	timeout := defaultTimeout
	cmd.ValidArgsFunction = completeClaims(g)
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, cancel, s, err := g.claimSession(cmd.Context(), args[0], timeout)
		if err != nil {
			return err
		}
		defer cancel()
		return run(ctx, cmd, s, args[0])
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for "+waitsFor)
	return cmd
}

func newDeleteCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:               "delete CLAIM",
		ValidArgsFunction: completeClaims(g),
		Aliases:           []string{"release", "rm"},
		Short:             "Release a claim: delete it and, with it, its sandbox",
		Example:           `  paddock delete my-agent`,
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.connect()
			if err != nil {
				return err
			}
			claim, err := s.getClaim(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// Not sdk.Sandbox.Release: that needs a Ready claim, and a stuck claim must be deletable too.
			if err := s.kube.Delete(cmd.Context(), claim); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting claim %q in namespace %q: %w", args[0], s.namespace, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "claim %s deleted\n", args[0])
			return nil
		},
	}
}
