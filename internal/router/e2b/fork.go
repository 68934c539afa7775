package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/httpjson"
)

// forkTag is the tag of the snapshot a fork takes.
const forkTag = "fork"

// fork serves POST /sandboxes/{id}/fork: one fresh snapshot of the sandbox, then count
// sandboxes claimed in parallel from its pool, each with the source's metadata, envs, network
// and resources and the request's timeout. The answer is 201 with one entry per fork, its
// sandbox or its error, in request order; a snapshot that fails fails the whole request. The
// forks' claims own the snapshot, so it is deleted with the last of them.
func (f *FrontDoor) fork(w http.ResponseWriter, r *http.Request, ns string) {
	var body e2bapi.ForkRequest
	if !readBody(w, r, &body) {
		return
	}
	count, lifetime, err := parseFork(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.withClaim(w, r, ns, func(src *extensionsv1beta1.SandboxClaim) {
		id, err := e2bapi.NewID()
		if err != nil {
			f.internal(w, err)
			return
		}
		snap, ref := f.takeSnapshot(r.Context(), src, snapshotRef{alias: id, tag: forkTag}, false, true)
		if ref != nil {
			writeError(w, ref.status, ref.msg)
			return
		}
		req := forkRequest(src, lifetime)
		results := make([]e2bapi.ForkResult, count)
		claims := make([]*extensionsv1beta1.SandboxClaim, count)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, sb, ref := f.startSandbox(r.Context(), ns, snap.Name, req)
				if ref != nil {
					results[i].Error = &e2bapi.Error{Code: ref.status, Message: ref.msg}
					return
				}
				claims[i], results[i].Sandbox = c, &sb
			}()
		}
		wg.Wait()
		f.giveToForks(snap, claims)
		httpjson.Write(w, http.StatusCreated, results)
	})
}

// parseFork reads fork's body: count 1 to MaxForkCount (default 1), timeout above 0 (default
// DefaultForkTimeoutSeconds, as on E2B), or an error naming the field.
func parseFork(body e2bapi.ForkRequest) (count int, lifetime time.Duration, err error) {
	count = 1
	if body.Count != nil {
		if *body.Count < 1 || *body.Count > e2bapi.MaxForkCount {
			return 0, 0, fmt.Errorf("count %d is out of range; give 1 to %d forks", *body.Count, e2bapi.MaxForkCount)
		}
		count = int(*body.Count)
	}
	if body.Timeout == nil {
		return count, e2bapi.DefaultForkTimeoutSeconds * time.Second, nil
	}
	if *body.Timeout == 0 {
		return 0, 0, errors.New("timeout 0: a fork's timeout must be above 0 seconds (timeoutMs of at least 1000)")
	}
	lifetime, err = timeoutOf(body.Timeout)
	return count, lifetime, err
}

// forkRequest is what each fork of src is claimed with: src's template ID, metadata, envs,
// network configuration (its egress policy included: a fork reaches no more than its source,
// and its claim shares src's rules Secret, so the fork keeps its rules when src goes)
// and resources, expiring after lifetime (a fork's timeout kills it, as on E2B).
func forkRequest(src *extensionsv1beta1.SandboxClaim, lifetime time.Duration) createRequest {
	req := createRequest{templateID: templateOf(src), lifetime: lifetime, metadata: src.Annotations[e2bapi.MetadataAnnotation],
		env:              append([]extensionsv1beta1.EnvVar(nil), src.Spec.Env...),
		network:          pick(src.Annotations, egress.PolicyAnnotation, e2bapi.NetworkAnnotation, e2bapi.AllowInternetAccessAnnotation),
		resources:        pick(src.Annotations, extensionsv1beta1.CPUAnnotation, extensionsv1beta1.MemoryAnnotation),
		sharedRuleSecret: src.Annotations[e2bapi.RulesSecretAnnotation]}
	return req
}

// pick is the entries of m under keys; nil when there are none.
func pick(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// giveToForks makes the claims of the forks that started the snapshot's owners, so that the
// garbage collector deletes it (its template and pool with it) once the last fork is gone; with
// no fork started it is deleted now.
func (f *FrontDoor) giveToForks(snap *snapshotsv1alpha1.SandboxSnapshot, claims []*extensionsv1beta1.SandboxClaim) {
	var owners []metav1.OwnerReference
	for _, c := range claims {
		if c != nil {
			owners = append(owners, metav1.OwnerReference{APIVersion: extensionsv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: c.Name, UID: c.UID})
		}
	}
	if len(owners) == 0 {
		f.deleteSnapshotObject(snap)
		return
	}
	base := snap.DeepCopy()
	snap.OwnerReferences = owners
	ctx, cancel := context.WithTimeout(context.Background(), controlSlack)
	defer cancel()
	if err := f.client.Patch(ctx, snap, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		f.cfg.Log.Error(err, "the forks' snapshot stays until deleted by hand: making the forks its owners failed", "snapshot", klog.KObj(snap))
	}
}
