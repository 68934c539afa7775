package e2bfrontdoor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/test/framework"
)

// The capture is a privileged Pod on the source's node (docs/design/snapshots.md); this API
// server has no node. The real snapshot controller runs, and playCaptures plays the node's part
// at the Pod level, as test/integration/snapshots does: the source Pod gets a node and a running
// containerd container, and each capture Pod ends with the result a real capture writes to its
// termination message. Faking at the Pod status rather than writing the snapshot's status keeps
// the controller's own path to Ready (the published template included) under test. The capture
// itself is proven on a real containerd by test/e2e/snapshotnode.

// failCaptureKey in a source sandbox's metadata makes its captures fail, as a capture that met
// a FIFO does.
const (
	failCaptureKey   = "test-capture"
	failCaptureError = "layer: /tmp/fifo is a FIFO; refusing it"
)

// playCaptures plays the node for the snapshots of h's namespace until the test ends.
func playCaptures(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var snaps snapshotsv1alpha1.SandboxSnapshotList
			if err := env.Client.List(ctx, &snaps, client.InNamespace(h.ns)); err == nil {
				for i := range snaps.Items {
					if s := &snaps.Items[i]; s.Status.Phase == "" || s.Status.Phase == snapshotsv1alpha1.SnapshotPhasePending {
						runOnNode(ctx, s)
					}
				}
			}
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(manager.DefaultNamespace), client.HasLabels{snapshotsv1alpha1.SnapshotUIDLabel}); err == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; p.Annotations[snapshotsv1alpha1.SnapshotNamespaceAnnotation] == h.ns && (p.Status.Phase == "" || p.Status.Phase == corev1.PodPending) {
						finishCapture(ctx, p)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// runOnNode binds the Pod of the snapshot's source to a node and reports its containers running
// under containerd, as the kubelet does.
func runOnNode(ctx context.Context, s *snapshotsv1alpha1.SandboxSnapshot) {
	var sb agentsv1beta1.Sandbox
	if env.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.SandboxName}, &sb) != nil {
		return
	}
	name := sb.Name
	if n := sb.Annotations[agentsv1beta1.PodNameAnnotation]; n != "" {
		name = n
	}
	var pod corev1.Pod
	if env.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &pod) != nil || len(pod.Status.ContainerStatuses) > 0 {
		return
	}
	if pod.Spec.NodeName == "" && framework.BindPod(ctx, env.Client, &pod, "node-a") != nil {
		return
	}
	_, _ = framework.UpdatePodStatus(ctx, env.Client, client.ObjectKeyFromObject(&pod), func(p *corev1.Pod) {
		for i, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Ready: true, Image: c.Image, ImageID: digestRef("registry.test:5000/base", c.Image),
				ContainerID: fmt.Sprintf("containerd://%064x", i+1),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			})
		}
	})
}

// finishCapture ends a capture Pod with a result: the image, or the failure its source's
// metadata asks for.
func finishCapture(ctx context.Context, pod *corev1.Pod) {
	ns, name := pod.Annotations[snapshotsv1alpha1.SnapshotNamespaceAnnotation], pod.Annotations[snapshotsv1alpha1.SnapshotNameAnnotation]
	var snap snapshotsv1alpha1.SandboxSnapshot
	if env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &snap) != nil {
		return
	}
	res, phase, code := snapshot.Result{Image: snapshotImage(ns, name), SizeBytes: 4096, PausedMilliseconds: 5}, corev1.PodSucceeded, int32(0)
	var src extensionsv1beta1.SandboxClaim
	if env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: snap.Labels[e2bapi.SnapshotSourceLabel]}, &src) == nil &&
		regexp.MustCompile(`"`+failCaptureKey+`":"fail"`).MatchString(src.Annotations[e2bapi.MetadataAnnotation]) {
		res, phase, code = snapshot.Result{Error: failCaptureError, PausedMilliseconds: 3}, corev1.PodFailed, 1
	}
	_, _ = framework.UpdatePodStatus(ctx, env.Client, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) {
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "capture", Image: testCaptureImage,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: string(res.Encode())}}}}
	})
}

// snapshotImage is the image a capture of ns/name stores.
func snapshotImage(ns, name string) string {
	return digestRef(testRepository+"/"+ns+"/"+name, ns+"/"+name)
}

func digestRef(repo, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// snapshotted is the createSnapshot answer.
type snapshotted struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func (h *harness) snapshot(t *testing.T, id string, body map[string]any) snapshotted {
	t.Helper()
	r := h.call(t, http.MethodPost, "/sandboxes/"+id+"/snapshots", h.apiKey, body)
	if r.status != http.StatusCreated {
		t.Fatalf("createSnapshot of %s with %v: %d %s", id, body, r.status, r.body)
	}
	var s snapshotted
	r.into(t, &s)
	return s
}

func (h *harness) listSnapshots(t *testing.T, key, query string) ([]snapshotted, string) {
	t.Helper()
	r := h.call(t, http.MethodGet, "/snapshots"+query, key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("listSnapshots%s: %d %s", query, r.status, r.body)
	}
	var out []snapshotted
	r.into(t, &out)
	return out, r.header.Get(e2bapi.NextTokenHeader)
}

func ids(list []snapshotted) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.SnapshotID)
	}
	return out
}

// TestSnapshotsOnTheWire: createSnapshot named and unnamed makes SandboxSnapshots of the
// sandbox's Sandbox in the key's namespace and answers E2B's IDs once they are Ready; list
// filters and pages them; create from an ID starts a sandbox of the snapshot's image; fork
// answers one sandbox per fork from one fresh snapshot, hidden from the list and owned by the
// forks; delete removes a snapshot and keeps the sandboxes started from it.
func TestSnapshotsOnTheWire(t *testing.T) {
	h := start(t, 1)
	playCaptures(t, h)
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	src := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{"run": "snap"}, "envVars": map[string]string{"A": "1"}})
	srcSandbox := h.boundSandbox(t, h.claim(t, src.SandboxID))

	named := h.snapshot(t, src.SandboxID, map[string]any{"name": "my-snap:v2"})
	if named.SnapshotID != h.ns+"/my-snap:v2" || len(named.Names) != 1 || named.Names[0] != h.ns+"/my-snap" {
		t.Errorf("named snapshot %+v; want ID %s/my-snap:v2 and names [%s/my-snap]", named, h.ns, h.ns)
	}
	var snap snapshotsv1alpha1.SandboxSnapshot
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: "my-snap--v2"}, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Spec.SandboxName != srcSandbox.Name || snap.Status.Phase != snapshotsv1alpha1.SnapshotPhaseReady {
		t.Errorf("SandboxSnapshot of %q in phase %q; want the source's Sandbox %q, Ready", snap.Spec.SandboxName, snap.Status.Phase, srcSandbox.Name)
	}
	var pool extensionsv1beta1.SandboxWarmPool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: snap.Name}, &pool); err != nil {
		t.Fatal(err)
	}
	if pool.Spec.TemplateRef.Name != snap.Status.TemplateName || *pool.Spec.Replicas != 0 || !metav1.IsControlledBy(&pool, &snap) {
		t.Errorf("snapshot pool of template %q, %d replicas, controller %v; want the published template %q, 0, the snapshot",
			pool.Spec.TemplateRef.Name, *pool.Spec.Replicas, metav1.GetControllerOf(&pool), snap.Status.TemplateName)
	}

	unnamed := h.snapshot(t, src.SandboxID, nil)
	if !regexp.MustCompile(`^[a-z2-7]{20}:default$`).MatchString(unnamed.SnapshotID) || unnamed.Names == nil || len(unnamed.Names) != 0 {
		t.Errorf("unnamed snapshot %+v; want <id>:default and names []", unnamed)
	}
	if r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/snapshots", h.apiKey, map[string]any{"name": "my-snap:v2"}); r.status != http.StatusConflict || r.code(t) != 409 {
		t.Errorf("a taken name: %d %s; want 409", r.status, r.body)
	}
	if r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/snapshots", h.apiKey, map[string]any{"name": "Bad_Name"}); r.status != http.StatusBadRequest {
		t.Errorf("a bad name: %d %s; want 400", r.status, r.body)
	}

	// List: all, by sandbox, by name, in pages.
	if all, next := h.listSnapshots(t, h.apiKey, ""); len(all) != 2 || next != "" {
		t.Errorf("listSnapshots = %v (next %q); want both snapshots on one page", ids(all), next)
	}
	if mine, _ := h.listSnapshots(t, h.apiKey, "?sandboxID="+src.SandboxID); len(mine) != 2 {
		t.Errorf("listSnapshots of the source = %v; want both", ids(mine))
	}
	if none, _ := h.listSnapshots(t, h.apiKey, "?sandboxID=nosuchsandbox"); len(none) != 0 {
		t.Errorf("listSnapshots of another sandbox = %v; want none", ids(none))
	}
	if byName, _ := h.listSnapshots(t, h.apiKey, "?name=my-snap"); len(byName) != 1 || byName[0].SnapshotID != named.SnapshotID {
		t.Errorf("listSnapshots by name = %v; want %s", ids(byName), named.SnapshotID)
	}
	first, next := h.listSnapshots(t, h.apiKey, "?limit=1")
	second, last := h.listSnapshots(t, h.apiKey, "?limit=1&nextToken="+next)
	if len(first) != 1 || len(second) != 1 || next == "" || last != "" || first[0].SnapshotID == second[0].SnapshotID {
		t.Errorf("pages %v (next %q) then %v (next %q); want one each, both snapshots, and no token after the last", ids(first), next, ids(second), last)
	}
	if r := h.call(t, http.MethodGet, "/snapshots?nextToken=Not_Ours", h.apiKey, nil); r.status != http.StatusBadRequest {
		t.Errorf("a forged nextToken: %d; want 400", r.status)
	}

	// Create from the snapshot: a claim of its pool, whose Sandbox runs the captured image.
	from := h.create(t, "/v2/sandboxes", map[string]any{"templateID": named.SnapshotID})
	fromClaim := h.claim(t, from.SandboxID)
	if from.TemplateID != named.SnapshotID || fromClaim.Spec.WarmPoolRef.Name != snap.Name {
		t.Errorf("create from %s: templateID %q, pool %q; want the snapshot ID and its pool %q", named.SnapshotID, from.TemplateID, fromClaim.Spec.WarmPoolRef.Name, snap.Name)
	}
	if img := h.boundSandbox(t, fromClaim).Spec.PodTemplate.Spec.Containers[0].Image; img != snapshotImage(h.ns, snap.Name) {
		t.Errorf("the sandbox started from the snapshot runs %q; want the snapshot's image %q", img, snapshotImage(h.ns, snap.Name))
	}
	if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": unnamed.SnapshotID}); r.status != http.StatusCreated {
		t.Errorf("create from the unnamed snapshot: %d %s", r.status, r.body)
	}

	// Fork: three sandboxes from one new snapshot, each with the source's metadata and envs.
	r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/fork", h.apiKey, map[string]any{"count": 3, "timeout": 60})
	if r.status != http.StatusCreated {
		t.Fatalf("fork: %d %s", r.status, r.body)
	}
	var forks []struct {
		Sandbox *created      `json:"sandbox"`
		Error   *e2bapi.Error `json:"error"`
	}
	r.into(t, &forks)
	if len(forks) != 3 {
		t.Fatalf("fork of 3 answered %d entries: %s", len(forks), r.body)
	}
	var forkSnap string
	owners := map[types.UID]bool{}
	for i, f := range forks {
		if f.Sandbox == nil || f.Error != nil || f.Sandbox.EnvdAccessToken == "" {
			t.Fatalf("fork %d: %s; want a sandbox with its token", i, r.body)
		}
		c := h.claim(t, f.Sandbox.SandboxID)
		owners[c.UID] = true
		forkSnap = c.Spec.WarmPoolRef.Name
		if c.Annotations[e2bapi.MetadataAnnotation] != `{"run":"snap"}` || len(c.Spec.Env) != 1 || c.Spec.Env[0].Value != "1" || c.Spec.Lifecycle == nil {
			t.Errorf("fork %d claim: metadata %q, env %v, lifecycle %v; want the source's and an expiry", i, c.Annotations[e2bapi.MetadataAnnotation], c.Spec.Env, c.Spec.Lifecycle)
		}
	}
	framework.Eventually(t, func(ctx context.Context) error {
		var s snapshotsv1alpha1.SandboxSnapshot
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: h.ns, Name: forkSnap}, &s); err != nil {
			return err
		}
		if s.Labels[e2bapi.ForkLabel] != "true" || len(s.OwnerReferences) != 3 {
			return fmt.Errorf("fork snapshot %s: labels %v, owners %v; want the fork label and the 3 forks' claims", s.Name, s.Labels, s.OwnerReferences)
		}
		for _, o := range s.OwnerReferences {
			if !owners[o.UID] {
				return fmt.Errorf("fork snapshot owner %v is not a fork's claim", o)
			}
		}
		return nil
	})
	if all, _ := h.listSnapshots(t, h.apiKey, ""); len(all) != 2 {
		t.Errorf("after the fork listSnapshots = %v; want the 2 snapshots, not the fork's", ids(all))
	}
	for _, body := range []map[string]any{{"count": 0}, {"count": 101}, {"timeout": 0}} {
		if r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/fork", h.apiKey, body); r.status != http.StatusBadRequest {
			t.Errorf("fork %v: %d %s; want 400", body, r.status, r.body)
		}
	}
	if r := h.call(t, http.MethodPost, "/sandboxes/nosuchsandbox/fork", h.apiKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
		t.Errorf("fork of an unknown sandbox: %d %s; want 404", r.status, r.body)
	}

	// Delete: the SDK percent-encodes the ID; the sandbox started from the snapshot stays.
	del := "/templates/" + url.PathEscape(named.SnapshotID)
	if r := h.call(t, http.MethodDelete, del, h.apiKey, nil); r.status != http.StatusNoContent {
		t.Fatalf("deleteSnapshot %s: %d %s", named.SnapshotID, r.status, r.body)
	}
	if r := h.call(t, http.MethodDelete, del, h.apiKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
		t.Errorf("second deleteSnapshot: %d %s; want 404 (the SDK returns false)", r.status, r.body)
	}
	if all, _ := h.listSnapshots(t, h.apiKey, ""); len(all) != 1 || all[0].SnapshotID != unnamed.SnapshotID {
		t.Errorf("after delete listSnapshots = %v; want only %s", ids(all), unnamed.SnapshotID)
	}
	if r := h.call(t, http.MethodGet, "/sandboxes/"+from.SandboxID, h.apiKey, nil); r.status != http.StatusOK {
		t.Errorf("the sandbox started from the deleted snapshot: %d %s; want it kept", r.status, r.body)
	}
	if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": named.SnapshotID}); r.status != http.StatusNotFound {
		t.Errorf("create from a deleted snapshot: %d %s; want 404", r.status, r.body)
	}
}

// TestSnapshotAttacker: another namespace's key can neither list, use, fork, snapshot nor delete
// a namespace's snapshots and sandboxes, and forged IDs name nothing; every answer is the one a
// missing object gets.
func TestSnapshotAttacker(t *testing.T) {
	h := start(t, 1)
	playCaptures(t, h)
	src := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base"})
	named := h.snapshot(t, src.SandboxID, map[string]any{"name": "secret"})
	unnamed := h.snapshot(t, src.SandboxID, nil)

	if list, _ := h.listSnapshots(t, h.otherKey, ""); len(list) != 0 {
		t.Errorf("another namespace's key lists %v", ids(list))
	}
	if list, _ := h.listSnapshots(t, h.otherKey, "?sandboxID="+src.SandboxID); len(list) != 0 {
		t.Errorf("another namespace's key lists %v by sandbox", ids(list))
	}
	for _, id := range []string{named.SnapshotID, unnamed.SnapshotID, "secret", "secret:default", "secret--default"} {
		if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.otherKey, map[string]any{"templateID": id}); r.status != http.StatusNotFound || r.code(t) != 404 {
			t.Errorf("another namespace's key creates from %q: %d %s; want 404", id, r.status, r.body)
		}
		if r := h.call(t, http.MethodDelete, "/templates/"+url.PathEscape(id), h.otherKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
			t.Errorf("another namespace's key deletes %q: %d %s; want 404", id, r.status, r.body)
		}
	}
	for _, path := range []string{"/fork", "/snapshots"} {
		if r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+path, h.otherKey, nil); r.status != http.StatusNotFound || r.code(t) != 404 {
			t.Errorf("another namespace's key POSTs %s: %d %s; want 404", path, r.status, r.body)
		}
	}
	// A key cannot name a snapshot into another namespace.
	if r := h.call(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/snapshots", h.apiKey, map[string]any{"name": h.otherNS + "/planted"}); r.status != http.StatusBadRequest {
		t.Errorf("a snapshot named into another namespace: %d %s; want 400", r.status, r.body)
	}
	// Forged IDs: unknown, malformed, or the object name of a snapshot in place of its alias. (The
	// object name alone is its pool's name, which a create may name in its own namespace.)
	for _, id := range []string{"zzzzzzzzzzzzzzzzzzzz:default", "../secret:default", h.ns + "/secret:nope", h.ns + "/secret--default:default"} {
		if r := h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": id}); r.status != http.StatusNotFound {
			t.Errorf("create from forged %q: %d %s; want 404", id, r.status, r.body)
		}
		if r := h.call(t, http.MethodDelete, "/templates/"+url.PathEscape(id), h.apiKey, nil); r.status != http.StatusNotFound {
			t.Errorf("delete forged %q: %d %s; want 404", id, r.status, r.body)
		}
	}
	// A SandboxSnapshot made with kubectl is not an E2B snapshot: not listed, not deletable.
	handmade := &snapshotsv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "handmade--default", Namespace: h.ns},
		Spec: snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: h.boundSandbox(t, h.claim(t, src.SandboxID)).Name}}
	framework.MustCreate(t, framework.Context(t, framework.DefaultTimeout), env.Client, handmade)
	if r := h.call(t, http.MethodDelete, "/templates/handmade", h.apiKey, nil); r.status != http.StatusNotFound {
		t.Errorf("deleting a kubectl snapshot through the front door: %d %s; want 404", r.status, r.body)
	}
	if err := env.Client.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKeyFromObject(handmade), handmade); err != nil || handmade.DeletionTimestamp != nil {
		t.Errorf("the kubectl snapshot after the front door's delete: %v, deleting %v", err, handmade.DeletionTimestamp)
	}
	// Everything the owner made is still there.
	if list, _ := h.listSnapshots(t, h.apiKey, ""); len(list) != 2 {
		t.Errorf("the owner lists %v after the attacks; want its 2 snapshots", ids(list))
	}
}

// TestSnapshotFailures: a failed capture answers 500 with the capture's error and leaves no
// snapshot behind, for createSnapshot and fork; a paused sandbox is 409 until resumed.
func TestSnapshotFailures(t *testing.T) {
	h := start(t, 1)
	playCaptures(t, h)
	bad := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base", "metadata": map[string]string{failCaptureKey: "fail"}})
	for _, path := range []string{"/snapshots", "/fork"} {
		r := h.call(t, http.MethodPost, "/sandboxes/"+bad.SandboxID+path, h.apiKey, map[string]any{})
		var e e2bapi.Error
		r.into(t, &e)
		if r.status != http.StatusInternalServerError || e.Code != 500 || !regexp.MustCompile(regexp.QuoteMeta(failCaptureError)).MatchString(e.Message) {
			t.Errorf("%s of a sandbox whose capture fails: %d %s; want 500 with the capture's error", path, r.status, r.body)
		}
	}
	framework.Eventually(t, func(ctx context.Context) error {
		var snaps snapshotsv1alpha1.SandboxSnapshotList
		if err := env.Client.List(ctx, &snaps, client.InNamespace(h.ns)); err != nil {
			return err
		}
		for _, s := range snaps.Items {
			if s.DeletionTimestamp == nil {
				return fmt.Errorf("failed snapshot %s is left behind (phase %s)", s.Name, s.Status.Phase)
			}
		}
		return nil
	})
	if list, _ := h.listSnapshots(t, h.apiKey, ""); len(list) != 0 {
		t.Errorf("failed snapshots are listed: %v", ids(list))
	}

	good := h.create(t, "/v2/sandboxes", map[string]any{"templateID": "base"})
	if r := h.call(t, http.MethodPost, "/sandboxes/"+good.SandboxID+"/pause", h.apiKey, map[string]any{}); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/snapshots", "/fork"} {
		if r := h.call(t, http.MethodPost, "/sandboxes/"+good.SandboxID+path, h.apiKey, map[string]any{}); r.status != http.StatusConflict || r.code(t) != 409 {
			t.Errorf("%s of a paused sandbox: %d %s; want 409", path, r.status, r.body)
		}
	}
	var snaps snapshotsv1alpha1.SandboxSnapshotList
	if err := env.Client.List(framework.Context(t, framework.DefaultTimeout), &snaps, client.InNamespace(h.ns), client.MatchingLabels{e2bapi.SnapshotSourceLabel: good.SandboxID}); err != nil || len(snaps.Items) != 0 {
		t.Errorf("a paused sandbox's refused snapshot left %d SandboxSnapshots (%v)", len(snaps.Items), err)
	}
}
