package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func newPoolCommand(g *Globals) *cobra.Command {
	pool := &cobra.Command{
		Use:   "pool",
		Short: "List and scale warm pools",
	}
	pool.AddCommand(&cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List warm pools with their desired, current and ready members",
		Example: `  paddock pool ls
  paddock pool ls -n agents -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.connect()
			if err != nil {
				return err
			}
			list := &extensionsv1beta1.SandboxWarmPoolList{}
			if err := s.kube.List(cmd.Context(), list, client.InNamespace(s.namespace)); err != nil {
				return fmt.Errorf("listing warm pools in namespace %q: %w", s.namespace, err)
			}
			return Print(cmd.OutOrStdout(), g.Output, list, PoolTable(list.Items, time.Now()))
		},
	}, newPoolScaleCommand(g))
	return pool
}

func newPoolScaleCommand(g *Globals) *cobra.Command {
	replicas := -1
	cmd := &cobra.Command{
		Use:               "scale POOL --replicas N",
		ValidArgsFunction: completePools(g),
		Short:             "Set a warm pool's replicas through its scale subresource",
		Example:           `  paddock pool scale python --replicas 5`,
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("replicas") {
				return fmt.Errorf("--replicas is required: the number of warm sandboxes to keep, e.g. --replicas 3")
			}
			if replicas < 0 || replicas > math.MaxInt32 {
				return fmt.Errorf("--replicas %d: must be between 0 and %d", replicas, math.MaxInt32)
			}
			s, err := g.connect()
			if err != nil {
				return err
			}
			pool := &extensionsv1beta1.SandboxWarmPool{}
			pool.Namespace, pool.Name = s.namespace, args[0]
			scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: int32(replicas)}}
			// A merge patch of the scale subresource: only spec.replicas changes, with no
			// resourceVersion to conflict on.
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
			err = s.kube.SubResource("scale").Patch(cmd.Context(), pool, client.RawPatch("application/merge-patch+json", []byte(patch)), client.WithSubResourceBody(scale))
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("warm pool %q not found in namespace %q (paddock pool ls lists the pools)", args[0], s.namespace)
			}
			if err != nil {
				return fmt.Errorf("scaling warm pool %q in namespace %q: %w", args[0], s.namespace, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "warm pool %s scaled to %d\n", args[0], scale.Spec.Replicas)
			return nil
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", -1, "number of unclaimed sandboxes the pool keeps (required)")
	return cmd
}
