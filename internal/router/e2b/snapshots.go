package e2b

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// The snapshots resource: createSnapshot, listSnapshots, deleteSnapshot, and create from a
// snapshot ID. A snapshot is a SandboxSnapshot in the key's namespace (docs/design/snapshots.md);
// the front door waits for it to be Ready and starts sandboxes from it through a SandboxWarmPool
// of its published template, owned by the snapshot, that keeps no members: each claim of it
// starts a Sandbox of the snapshot's image. Fork (fork.go) takes a fresh snapshot and claims
// that pool count times.

// createSnapshot serves POST /sandboxes/{id}/snapshots: capture the sandbox, answer once the
// snapshot is Ready. A snapshot that fails or is not ready in CreateTimeout is deleted.
func (f *FrontDoor) createSnapshot(w http.ResponseWriter, r *http.Request, ns string) {
	var body e2bapi.SnapshotRequest
	if !readBody(w, r, &body) {
		return
	}
	var ref snapshotRef
	named := body.Name != ""
	if named {
		var err error
		if ref, err = parseSnapshotName(body.Name, ns); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	f.withClaim(w, r, ns, func(c *extensionsv1beta1.SandboxClaim) {
		if !named {
			id, err := e2bapi.NewID()
			if err != nil {
				f.internal(w, err)
				return
			}
			ref = snapshotRef{alias: id, tag: e2bapi.DefaultSnapshotTag}
		}
		snap, rf := f.takeSnapshot(r.Context(), c, ref, named, false)
		if rf != nil {
			writeError(w, rf.status, rf.msg)
			return
		}
		httpjson.Write(w, http.StatusCreated, snapshotInfo(snap))
	})
}

// takeSnapshot creates the SandboxSnapshot ref of the sandbox c claims, waits until it is Ready
// and gives it its pool. On failure the snapshot is deleted and the refusal says why: 409 while
// the sandbox is not running or the name is taken, 500 with the capture's error, 503 when it
// was not ready in time.
func (f *FrontDoor) takeSnapshot(ctx context.Context, c *extensionsv1beta1.SandboxClaim, ref snapshotRef, named, fork bool) (*snapshotsv1alpha1.SandboxSnapshot, *refusal) {
	sb, err := f.boundSandbox(ctx, c)
	if err != nil {
		f.cfg.Log.Error(err, "E2B control-plane request failed")
		return nil, &refusal{http.StatusInternalServerError, err.Error()}
	}
	if sb == nil {
		return nil, &refusal{http.StatusConflict, fmt.Sprintf("sandbox %q has not started yet; wait for create to return", c.Name)}
	}
	if stateOf(sb) == e2bapi.StatePaused {
		return nil, &refusal{http.StatusConflict, fmt.Sprintf("sandbox %q is paused; resume it first (Sandbox.connect)", c.Name)}
	}
	snap := &snapshotsv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: ref.objectName(), Namespace: c.Namespace, Labels: map[string]string{
			e2bapi.SnapshotLabel: "true", e2bapi.SnapshotSourceLabel: c.Name,
			e2bapi.SnapshotAliasLabel: ref.alias, e2bapi.SnapshotTagLabel: ref.tag,
		}},
		Spec: snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: sb.Name},
	}
	if named {
		snap.Labels[e2bapi.SnapshotNamedLabel] = "true"
	}
	if fork {
		snap.Labels[e2bapi.ForkLabel] = "true"
	}
	err = f.client.Create(ctx, snap)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, &refusal{http.StatusConflict, fmt.Sprintf("a snapshot named %s:%s exists already in namespace %s; delete it (Sandbox.deleteSnapshot) or give another tag", ref.alias, ref.tag, c.Namespace)}
	case err != nil:
		f.cfg.Log.Error(err, "E2B control-plane request failed")
		return nil, &refusal{http.StatusInternalServerError, fmt.Sprintf("creating SandboxSnapshot %s/%s: %v", snap.Namespace, snap.Name, err)}
	}
	waitCtx, cancel := context.WithTimeout(ctx, f.cfg.CreateTimeout)
	defer cancel()
	ready, rf := f.awaitSnapshot(waitCtx, snap)
	if rf == nil {
		_, rf = f.snapshotPool(ctx, ready)
	}
	if rf != nil {
		f.deleteSnapshotObject(snap)
		return nil, rf
	}
	return ready, nil
}

// awaitSnapshot follows snap on the front door's watch until it is Ready (its template
// published) or Failed, or ctx ends.
func (f *FrontDoor) awaitSnapshot(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (*snapshotsv1alpha1.SandboxSnapshot, *refusal) {
	changed, stop := f.waits.followKeys(snapshotKey(snap.Namespace, snap.Name))
	defer stop()
	seen := false
	last := fmt.Sprintf("the front door's cache does not show SandboxSnapshot %s/%s yet", snap.Namespace, snap.Name)
	for {
		var got snapshotsv1alpha1.SandboxSnapshot
		err := f.cache.Get(ctx, client.ObjectKeyFromObject(snap), &got)
		switch {
		case err == nil && got.UID == snap.UID && got.DeletionTimestamp == nil:
			seen = true
			ready := meta.FindStatusCondition(got.Status.Conditions, snapshotsv1alpha1.ConditionReady)
			if got.Status.Phase == snapshotsv1alpha1.SnapshotPhaseReady && ready != nil && ready.Status == metav1.ConditionTrue {
				return &got, nil
			}
			captured := meta.FindStatusCondition(got.Status.Conditions, snapshotsv1alpha1.ConditionCaptured)
			if got.Status.Phase == snapshotsv1alpha1.SnapshotPhaseFailed {
				msg := "the capture failed"
				if captured != nil {
					msg = captured.Reason + ": " + captured.Message
				}
				return nil, &refusal{http.StatusInternalServerError, fmt.Sprintf("snapshot of sandbox %q failed: %s", snap.Labels[e2bapi.SnapshotSourceLabel], msg)}
			}
			last = fmt.Sprintf("SandboxSnapshot %s/%s is %s", snap.Namespace, snap.Name, got.Status.Phase)
			if ready != nil {
				last += " (" + ready.Reason + ": " + ready.Message + ")"
			}
		case seen:
			return nil, &refusal{http.StatusInternalServerError, fmt.Sprintf("SandboxSnapshot %s/%s was deleted before it was ready", snap.Namespace, snap.Name)}
		}
		select {
		case <-ctx.Done():
			return nil, &refusal{http.StatusServiceUnavailable, fmt.Sprintf("the snapshot was not ready in %s: %s", f.cfg.CreateTimeout, last)}
		case <-changed:
		}
	}
}

// deleteSnapshotObject deletes a snapshot nobody will use (its template and pool go with it).
func (f *FrontDoor) deleteSnapshotObject(snap *snapshotsv1alpha1.SandboxSnapshot) {
	err := f.client.Delete(context.Background(), snap, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		f.cfg.Log.Error(err, "deleting the SandboxSnapshot of a failed snapshot", "snapshot", klog.KObj(snap))
	}
}

// snapshotPool is the SandboxWarmPool that starts sandboxes from a Ready snapshot: named after
// it, of its published template, with no members, owned by it. It is created when missing.
func (f *FrontDoor) snapshotPool(ctx context.Context, snap *snapshotsv1alpha1.SandboxSnapshot) (string, *refusal) {
	var pool extensionsv1beta1.SandboxWarmPool
	err := f.cache.Get(ctx, client.ObjectKeyFromObject(snap), &pool)
	if apierrors.IsNotFound(err) {
		pool = extensionsv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Name: snap.Name, Namespace: snap.Namespace,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(snap, snapshotsv1alpha1.GroupVersion.WithKind("SandboxSnapshot"))}},
			Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](0),
				TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: snap.Status.TemplateName}},
		}
		err = f.client.Create(ctx, &pool)
		if apierrors.IsAlreadyExists(err) {
			err = f.client.Get(ctx, client.ObjectKeyFromObject(snap), &pool)
		}
	}
	if err != nil {
		f.cfg.Log.Error(err, "E2B control-plane request failed")
		return "", &refusal{http.StatusInternalServerError, fmt.Sprintf("the SandboxWarmPool of snapshot %s/%s: %v", snap.Namespace, snap.Name, err)}
	}
	if pool.Spec.TemplateRef.Name != snap.Status.TemplateName {
		return "", &refusal{http.StatusConflict, fmt.Sprintf("SandboxWarmPool %s/%s serves template %q, not the snapshot's %q; delete or rename that pool",
			pool.Namespace, pool.Name, pool.Spec.TemplateRef.Name, snap.Status.TemplateName)}
	}
	return pool.Name, nil
}

// frontDoorSnapshot reads the front-door snapshot ref of ns from the API server (not the cache,
// so that a caller sees its own last write: a snapshot it deleted is gone); nil when there is
// none, it is being deleted, or kubectl made it.
func (f *FrontDoor) frontDoorSnapshot(ctx context.Context, ns string, ref snapshotRef) (*snapshotsv1alpha1.SandboxSnapshot, error) {
	var snap snapshotsv1alpha1.SandboxSnapshot
	err := f.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.objectName()}, &snap)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading SandboxSnapshot %s/%s: %w", ns, ref.objectName(), err)
	case snap.DeletionTimestamp != nil || snap.Labels[e2bapi.SnapshotLabel] != "true":
		return nil, nil
	}
	return &snap, nil
}

// poolForTemplate is the pool a create's templateID names: a snapshot's ("alias:tag",
// "namespace/alias:tag"), a pool's as poolFor finds it, else the snapshot of that alias's
// default tag.
func (f *FrontDoor) poolForTemplate(ctx context.Context, ns, templateID string) (string, *refusal) {
	if f.noSnapshots != "" {
		pool, err := f.poolFor(ctx, ns, templateID)
		if err != nil {
			return "", &refusal{http.StatusNotFound, err.Error()}
		}
		return pool, nil
	}
	if isSnapshotID(templateID) {
		return f.poolOfSnapshot(ctx, ns, templateID)
	}
	pool, err := f.poolFor(ctx, ns, templateID)
	if err == nil {
		return pool, nil
	}
	pool, ref := f.poolOfSnapshot(ctx, ns, templateID)
	if ref != nil && ref.status == http.StatusNotFound {
		return "", &refusal{http.StatusNotFound, err.Error()}
	}
	return pool, ref
}

// poolOfSnapshot is the pool of the Ready front-door snapshot id names in ns; 404 when there is
// none (another namespace's ID included).
func (f *FrontDoor) poolOfSnapshot(ctx context.Context, ns, id string) (string, *refusal) {
	notFound := &refusal{http.StatusNotFound, fmt.Sprintf("template %q not found: namespace %q has no snapshot of that ID (Sandbox.listSnapshots lists them)", id, ns)}
	ref, ok := parseSnapshotID(id, ns)
	if !ok {
		return "", notFound
	}
	snap, err := f.frontDoorSnapshot(ctx, ns, ref)
	if err != nil {
		f.cfg.Log.Error(err, "E2B control-plane request failed")
		return "", &refusal{http.StatusInternalServerError, err.Error()}
	}
	if snap == nil || snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		return "", notFound
	}
	return f.snapshotPool(ctx, snap)
}

// listSnapshots serves GET /snapshots: the key's namespace's Ready front-door snapshots, forks'
// snapshots left out, filtered by sandboxID and name, in pages.
func (f *FrontDoor) listSnapshots(w http.ResponseWriter, r *http.Request, ns string) {
	q := r.URL.Query()
	bounds, err := parsePageBounds(q, isSnapshotObjectName)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	match := client.MatchingLabels{e2bapi.SnapshotLabel: "true"}
	if id := q.Get("sandboxID"); id != "" {
		if !e2bapi.IsID(id) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("sandboxID %q is not a sandbox ID (lower-case letters and digits)", id))
			return
		}
		match[e2bapi.SnapshotSourceLabel] = id
	}
	alias, tag, ok := parseSnapshotFilter(q.Get("name"), ns)
	if !ok {
		// Another namespace's name, or one no snapshot can have: nothing matches.
		writeSnapshotPage(w, nil, "")
		return
	}
	if alias != "" {
		match[e2bapi.SnapshotAliasLabel] = alias
	}
	if tag != "" {
		match[e2bapi.SnapshotTagLabel] = tag
	}
	var list snapshotsv1alpha1.SandboxSnapshotList
	// From the API server, as frontDoorSnapshot reads: a snapshot the caller just deleted is not listed.
	if err := f.client.List(r.Context(), &list, client.InNamespace(ns), match); err != nil {
		f.internal(w, fmt.Errorf("listing SandboxSnapshots in %s: %w", ns, err))
		return
	}
	var all []*snapshotsv1alpha1.SandboxSnapshot
	for i := range list.Items {
		s := &list.Items[i]
		if s.DeletionTimestamp != nil || s.Labels[e2bapi.ForkLabel] == "true" || s.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
			continue
		}
		all = append(all, s)
	}
	items, next := page(all, func(s *snapshotsv1alpha1.SandboxSnapshot) string { return s.Name }, bounds)
	writeSnapshotPage(w, items, next)
}

func writeSnapshotPage(w http.ResponseWriter, items []*snapshotsv1alpha1.SandboxSnapshot, next string) {
	out := make([]e2bapi.SnapshotInfo, 0, len(items))
	for _, s := range items {
		out = append(out, snapshotInfo(s))
	}
	if next != "" {
		w.Header().Set(e2bapi.NextTokenHeader, next)
	}
	httpjson.Write(w, http.StatusOK, out)
}

// deleteSnapshot serves DELETE /templates/{id}: a front-door snapshot of the key's namespace is
// deleted (with its template and pool; sandboxes started from it keep running); anything else
// is not found. Templates that are not snapshots are pools, deleted with kubectl.
func (f *FrontDoor) deleteSnapshot(w http.ResponseWriter, r *http.Request, ns string) {
	id := r.PathValue("id") // unescaped: the SDK sends "ns%2Falias%3Atag"
	notFound := fmt.Sprintf("snapshot %q not found in namespace %q; only snapshots are deleted through this API (a pool's template is deleted with kubectl)", id, ns)
	ref, ok := parseSnapshotID(id, ns)
	if !ok {
		writeError(w, http.StatusNotFound, notFound)
		return
	}
	snap, err := f.frontDoorSnapshot(r.Context(), ns, ref)
	if err != nil {
		f.internal(w, err)
		return
	}
	if snap == nil {
		writeError(w, http.StatusNotFound, notFound)
		return
	}
	err = f.client.Delete(r.Context(), snap, client.Preconditions{UID: &snap.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		writeError(w, http.StatusNotFound, notFound)
	case err != nil:
		f.internal(w, fmt.Errorf("deleting SandboxSnapshot %s/%s: %w", snap.Namespace, snap.Name, err))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
