package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// e2bForkCount is the fork of 10.
const e2bForkCount = 10

// snapshotE2B runs the unmodified e2b SDK's snapshot and fork calls (the integration tier's
// client/snapshot.mjs, without its played failures) against the front door on the real node:
// createSnapshot unnamed and named, listSnapshots of the sandbox, by name and paged,
// Sandbox.create(snapshotId) with the source's file, a fork of 10 where every fork has the
// source's files and its own writes, another namespace's key refused everywhere, deleteSnapshot.
// The source runs make dev's base template without its volume (written before snapshots held
// volumes; running it with base's volume is not done yet). Once the script killed its
// sandboxes, every snapshot goes and the registry no longer serves its image.
func snapshotE2B(t *testing.T, gvisor bool) {
	ns, otherNS := namespace(t), namespace(t)
	ctx := framework.Context(t, 30*time.Minute)
	c := paddockClient(t)
	copyE2BTemplate(t, ctx, c, ns, e2b.DefaultTemplate, false)
	if !gvisor {
		// The template controller writes the new template too: read, change, write until no conflict.
		framework.Eventually(t, func(ctx context.Context) error {
			var tpl extensionsv1beta1.SandboxTemplate
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: e2b.DefaultTemplate}, &tpl); err != nil {
				return err
			}
			tpl.Spec.PodTemplate.Spec.RuntimeClassName = nil
			return c.Update(ctx, &tpl)
		})
	}
	framework.MustCreate(t, ctx, c, poolOf(ns, e2b.DefaultTemplate, 1))
	key, otherKey, url := e2bAPIKey(t, ctx, c, ns), e2bAPIKey(t, ctx, c, otherNS), e2bURL(t, ctx, c)
	dir := e2bClientDir(t)
	waitPoolReady(t, c, ns, e2b.DefaultTemplate, 1)

	env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key, "E2B_PKG="+e2bSDKs[0], "OTHER_KEY="+otherKey,
		"E2B_TEMPLATE="+e2b.DefaultTemplate, fmt.Sprintf("FORK_COUNT=%d", e2bForkCount), "CHECK_FILES=1")
	out, err := node(t, ctx, dir, env, "snapshot.mjs")
	if err != nil || !strings.Contains(out, "all checks passed") {
		t.Fatalf("the E2B SDK's snapshot calls through the front door: %v", err)
	}

	// Every sandbox is killed: the snapshots go (the forks' with their claims), each deleting its image.
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		var snaps snapshotsv1alpha1.SandboxSnapshotList
		if err := c.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(snaps.Items) > 0 {
			s := snaps.Items[0]
			return fmt.Errorf("%d snapshots remain in %s, first %s: %s", len(snaps.Items), ns, s.Name, builder.FormatConditions(s.Status.Conditions))
		}
		return nil
	})
	images := deletedImages(t, ctx, c, ns)
	// The unnamed, the named and the two forks' snapshots.
	if len(images) != 4 {
		t.Errorf("%d images deleted in %s (%v); want 4", len(images), ns, images)
	}
	for _, image := range images {
		if got := framework.ManifestStatus(t, image); got != http.StatusNotFound {
			t.Errorf("the registry answers %d for %s of a deleted snapshot; want 404", got, image)
		}
	}
}

// deletedImageNote is the note of the controller's ImageDeleted event.
var deletedImageNote = regexp.MustCompile(`^deleted (\S+) from the registry$`)

// deletedImages lists the images the snapshot controller reported deleted in ns.
func deletedImages(t *testing.T, ctx context.Context, c client.Client, ns string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, e := range list.Items {
		if e.Reason != snapshotsv1alpha1.ReasonImageDeleted {
			continue
		}
		if m := deletedImageNote.FindStringSubmatch(e.Note); m != nil {
			images = append(images, m[1])
		}
	}
	return images
}
