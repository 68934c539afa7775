package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/dist"
)

type uninstallOptions struct {
	Force    bool
	KeepCRDs bool
	Timeout  time.Duration
}

func newUninstallCommand(g *Globals) *cobra.Command {
	o := &uninstallOptions{}
	cmd := &cobra.Command{
		Use:   "uninstall [--force] [--keep-crds]",
		Short: "Delete everything dist/paddock.yaml installs, refusing while sandboxes, claims, pools or templates exist",
		Long: `Deletes the objects of the install bundle (dist/paddock.yaml, built into this binary) in reverse
order. Deleting a CRD deletes every object of its kind, so uninstall first lists every Sandbox,
SandboxClaim, SandboxWarmPool and SandboxTemplate in all namespaces and refuses while any exist,
unless --force. --keep-crds keeps the CRDs and with them those objects.

The opt-in router, snapshot and egress bundles' objects go too when present. paddock-egress's
iptables chains stay on the nodes it ran on (it fails closed: policed sandboxes there have no
egress); uninstall says so and how to remove them.`,
		Example: `  paddock uninstall
  paddock uninstall --keep-crds
  paddock uninstall --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUninstall(cmd, g, o) },
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "uninstall even though deleting the CRDs deletes the listed objects")
	cmd.Flags().BoolVar(&o.KeepCRDs, "keep-crds", false, "keep the CRDs, and so every Sandbox, claim, pool and template")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", defaultTimeout, "how long to wait for the CRDs to be gone")
	return cmd
}

func runUninstall(cmd *cobra.Command, g *Globals, o *uninstallOptions) error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive, e.g. --timeout 2m", o.Timeout)
	}
	bundle, err := ParseBundle(dist.Bundle)
	if err != nil {
		return err
	}
	// The router's bundle is applied after the main one; its objects go first.
	router, err := ParseBundle(dist.RouterBundle)
	if err != nil {
		return err
	}
	bundle = append(bundle, router...)
	// So is the opt-in snapshot bundle's (objects it did not install are skipped as absent).
	snapshots, err := ParseBundle(dist.SnapshotsBundle)
	if err != nil {
		return err
	}
	bundle = append(bundle, snapshots...)
	egress, err := ParseBundle(dist.EgressBundle)
	if err != nil {
		return err
	}
	bundle = append(bundle, egress...)
	s, err := g.connect()
	if err != nil {
		return err
	}
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	egressNodes, err := anyPresent(ctx, s.kube, ofKind(egress, "DaemonSet"))
	if err != nil {
		return err
	}
	objs, err := listUserObjects(ctx, s.kube)
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		if err := PrintUserObjects(out, objs); err != nil {
			return err
		}
		switch {
		case o.KeepCRDs:
			fmt.Fprintf(out, "keeping %s with their CRDs (--keep-crds)\n", Summary(objs))
		case !o.Force:
			return fmt.Errorf("refusing to uninstall: %s would be deleted with their CRDs; delete them first or pass --force", Summary(objs))
		default:
			fmt.Fprintf(out, "deleting %s with their CRDs (--force)\n", Summary(objs))
		}
	}
	if o.KeepCRDs {
		bundle = withoutCRDs(bundle)
	}
	deleted, err := deleteReversed(ctx, s.kube, out, bundle)
	if err != nil {
		return err
	}
	if deleted == 0 {
		fmt.Fprintln(out, "nothing to do: no object of the install bundle is installed")
		return nil
	}
	if err := waitForCRDsGone(ctx, s.kube, out, crdsOf(bundle), o.Timeout); err != nil {
		return err
	}
	if egressNodes {
		fmt.Fprintln(out, egressChainsRemain)
	}
	if o.KeepCRDs {
		fmt.Fprintf(out, "uninstalled: deleted %d objects; kept the CRDs and their objects (--keep-crds)\n", deleted)
		return nil
	}
	fmt.Fprintf(out, "uninstalled: deleted %d objects\n", deleted)
	return nil
}

// egressChainsRemain is what uninstall says after deleting paddock-egress: its chains outlive it
// by design, so that a restart never opens a policed sandbox.
const egressChainsRemain = "paddock-egress's iptables chains stay on the nodes it ran on, and policed sandboxes there have no egress (it fails closed); " +
	"remove them by running `paddock-egress --cleanup` on each node (as root, in the host's network namespace)"

// ofKind is the objects of objs of kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// anyPresent says whether any of objs exists in the cluster.
func anyPresent(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (bool, error) {
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
		if absent(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
		}
		return true, nil
	}
	return false, nil
}

// listUserObjects lists every object of userKinds in all namespaces, skipping kinds whose CRD is
// not installed.
func listUserObjects(ctx context.Context, c client.Client) ([]UserObject, error) {
	var objs []UserObject
	for _, kind := range userKinds {
		gv := extensionsv1beta1.GroupVersion
		switch kind {
		case "Sandbox":
			gv = agentsv1beta1.GroupVersion
		case "SandboxSnapshot":
			gv = snapshotsv1alpha1.GroupVersion
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gv.WithKind(kind + "List"))
		err := c.List(ctx, list)
		if absent(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s in all namespaces: %w", plural(kind, 2), err)
		}
		for _, item := range list.Items {
			objs = append(objs, UserObject{Kind: kind, Namespace: item.Namespace, Name: item.Name})
		}
	}
	return objs, nil
}

// absent says err means the object, or its whole kind, does not exist.
func absent(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// deleteReversed deletes objs last first, so the controller stops before its RBAC, CRDs and
// namespace go. It returns how many it asked the API server to delete; absent objects and
// objects already being deleted are left alone.
func deleteReversed(ctx context.Context, c client.Client, out io.Writer, objs []*unstructured.Unstructured) (int, error) {
	deleted := 0
	for i := len(objs) - 1; i >= 0; i-- {
		want := objs[i]
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(want), live)
		if absent(err) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("reading %s: %w", describe(want), err)
		}
		if live.GetDeletionTimestamp() != nil {
			fmt.Fprintf(out, "%s is already being deleted\n", describe(want))
			continue
		}
		err = c.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if absent(err) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("deleting %s: %w", describe(want), err)
		}
		deleted++
		fmt.Fprintf(out, "deleted %s\n", describe(want))
	}
	return deleted, nil
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

func isCRD(u *unstructured.Unstructured) bool { return u.GroupVersionKind().GroupKind() == crdKind }

func withoutCRDs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var kept []*unstructured.Unstructured
	for _, u := range objs {
		if !isCRD(u) {
			kept = append(kept, u)
		}
	}
	return kept
}

func crdsOf(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var crds []*unstructured.Unstructured
	for _, u := range objs {
		if isCRD(u) {
			crds = append(crds, u)
		}
	}
	return crds
}

// waitForCRDsGone polls until every CRD is gone: the API server deletes a CRD only after it has
// deleted every object of its kind, which is what the user waits for.
func waitForCRDsGone(ctx context.Context, c client.Client, out io.Writer, crds []*unstructured.Unstructured, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Time{}
	for {
		var left []string
		for _, crd := range crds {
			err := c.Get(ctx, client.ObjectKeyFromObject(crd), &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind()}})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("reading CRD %s: %w", crd.GetName(), err)
			}
			left = append(left, crd.GetName())
		}
		if len(left) == 0 {
			return nil
		}
		if time.Since(lastReport) >= 5*time.Second {
			fmt.Fprintf(out, "waiting for %d CRDs to be deleted, with their objects: %s\n", len(left), strings.Join(left, ", "))
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRDs %s still exist after --timeout %s; `kubectl get crd %s -o yaml` shows what holds them (objects with finalizers keep a CRD Terminating)",
				strings.Join(left, ", "), timeout, left[0])
		case <-tick.C:
		}
	}
}
