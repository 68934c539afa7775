// Package warmpool decides what a SandboxWarmPool reconcile does: which members to delete,
// adopt or relabel, how many to create, and what the status says. It also keeps the in-memory
// create/delete expectations that stop a pool from over-creating while its cache lags.
//
// Everything here is pure apart from the expectations' mutex: no client, no context, no logging.
package warmpool

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Member is what the plan needs to know about one Sandbox carrying the pool's label.
type Member struct {
	Name string
	UID  types.UID
	// ResourceVersion is the version the plan saw. A delete is conditional on it, so that a
	// member a claim took after the observation is never deleted.
	ResourceVersion string
	// Owned is true when the pool is the member's controller; false for an orphan.
	Owned bool
	// Deleting is true when the member has a deletionTimestamp.
	Deleting bool
	// DeletePending is true when the pool deleted the member and has not yet seen it go.
	DeletePending bool
	Ready         bool
	// Stale is true when the member was made from another template or an older blueprint.
	Stale bool
	// Unschedulable is true when its Pod cannot be scheduled (PodScheduled=False/Unschedulable).
	Unschedulable bool
	// Incompatible says why the member can never start (its Sandbox's Ready message for reason
	// ImageIncompatible or InjectionInvalid); empty otherwise.
	Incompatible string
	// LaunchTypeWarm is true when the member carries launch-type=warm.
	LaunchTypeWarm bool
	Created        time.Time
}

// Input is the rest of what the plan depends on.
type Input struct {
	Desired  int
	MaxBatch int
	// Recreate is true under the Recreate update strategy: stale owned members are replaced.
	Recreate bool
	// TemplateKnown is false when the template could not be read: then nothing is created and
	// staleness is not judged.
	TemplateKnown bool
	// ExpectationsSatisfied is false while earlier creates or deletes are unobserved.
	ExpectationsSatisfied bool
	// Grace is how long a member may stay not Ready before it is replaced or held.
	Grace time.Duration
	// MaxStarting caps the pool's starting members (not Ready, neither unschedulable nor
	// incompatible), those about to be created included, while the pool has Ready members to
	// spare (SpareReady); 0 does not. Starting a member is what costs the node CPU; with the cap
	// a refill runs at most this many starts at once, and a claim's critical path shares the node
	// with no more than that. A pool short of Ready members starts every missing one at once: a
	// slower refill there would cost warm hits, which matter more than a faster warm path. The
	// member's Ready event brings the next reconcile, so nothing waits on a timer.
	MaxStarting int
	Now         time.Time
}

// DeleteReason says why a member is deleted.
type DeleteReason string

// Reasons for deleting a member.
const (
	DeleteStale  DeleteReason = "Stale"
	DeleteStuck  DeleteReason = "NotReadyPastGracePeriod"
	DeleteExcess DeleteReason = "Excess"
)

// Deletion is a member to delete.
type Deletion struct {
	Name string
	UID  types.UID
	// ResourceVersion is the member's version the plan saw; the delete is conditional on it.
	ResourceVersion string
	Owned           bool
	Reason          DeleteReason
}

// Plan is what one reconcile does.
type Plan struct {
	Delete []Deletion
	// Adopt lists fresh orphans the pool takes over.
	Adopt []string
	// Relabel lists owned members missing launch-type=warm.
	Relabel []string
	// Create is how many members to create now.
	Create int
	// Replicas counts active members, Ready or not; ReadyReplicas the Ready ones.
	Replicas, ReadyReplicas int32
	// Unschedulable counts not-Ready members held past the grace period because their Pod cannot
	// be scheduled: replacements would be just as unschedulable.
	Unschedulable int
	// Incompatible counts members that can never start as the template stands, held until it
	// changes; IncompatibleMessage is the first of them by name, with its cause.
	Incompatible        int
	IncompatibleMessage string
	// RecheckAt is the earliest time a young not-Ready member's grace period ends; zero if none.
	RecheckAt time.Time
	// Starting counts active members that are starting (not Ready, neither unschedulable nor
	// incompatible); HeldStarting is how many creates MaxStarting held back.
	Starting, HeldStarting int
	// CapLifted is true when MaxStarting is set but did not apply, the pool being short of
	// Ready members (SpareReady).
	CapLifted bool
}

// SpareReady reports whether a pool of desired members whose ready members are Ready has
// Ready members to spare: at least half of desired, rounded up. Below that the pool is about to
// run dry, and its starts are not capped.
func SpareReady(ready int32, desired int) bool {
	return int(ready)*2 >= desired
}

// Make computes the plan for one pass.
func Make(members []Member, in Input) Plan {
	var p Plan
	var active []Member
	terminating := 0
	for _, m := range members {
		switch {
		case m.Deleting || (m.Owned && m.DeletePending):
			if m.Owned {
				terminating++
			}
			continue
		// An incompatible member is replaced as soon as the template changes: the change may be
		// the fix, and the member serves nobody.
		case in.TemplateKnown && m.Stale && (in.Recreate || !m.Owned || m.Incompatible != ""):
			p.Delete = append(p.Delete, Deletion{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Owned: m.Owned, Reason: DeleteStale})
			terminating++
			continue
		case !m.Owned && !in.TemplateKnown:
			continue // an orphan's staleness cannot be judged without the template
		case !m.Owned:
			p.Adopt = append(p.Adopt, m.Name)
		case !m.LaunchTypeWarm:
			p.Relabel = append(p.Relabel, m.Name)
		}
		if !m.Ready {
			deadline := m.Created.Add(in.Grace)
			switch {
			case m.Incompatible != "":
				// Known now, not after the grace period; a replacement would fail the same way.
				p.Incompatible++
				if first := m.Name + ": " + m.Incompatible; p.IncompatibleMessage == "" || first < p.IncompatibleMessage {
					p.IncompatibleMessage = first
				}
			case in.Now.Before(deadline):
				if p.RecheckAt.IsZero() || deadline.Before(p.RecheckAt) {
					p.RecheckAt = deadline
				}
				if !m.Unschedulable {
					p.Starting++
				}
			case m.Unschedulable:
				p.Unschedulable++
			default:
				p.Delete = append(p.Delete, Deletion{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Owned: true, Reason: DeleteStuck})
				terminating++
				continue
			}
		}
		active = append(active, m)
		if m.Ready {
			p.ReadyReplicas++
		}
	}
	p.Replicas = int32(len(active))
	if !in.ExpectationsSatisfied {
		return p
	}
	if total := len(active) + terminating; in.TemplateKnown && total < in.Desired {
		p.Create = min(in.Desired-total, in.MaxBatch)
		p.CapLifted = in.MaxStarting > 0 && !SpareReady(p.ReadyReplicas, in.Desired)
		if in.MaxStarting > 0 && !p.CapLifted {
			allowed := max(0, in.MaxStarting-p.Starting)
			p.HeldStarting = max(0, p.Create-allowed)
			p.Create -= p.HeldStarting
		}
	}
	if excess := len(active) - in.Desired; excess > 0 {
		for _, m := range excessOrder(active)[:min(excess, in.MaxBatch)] {
			p.Delete = append(p.Delete, Deletion{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Owned: m.Owned, Reason: DeleteExcess})
		}
	}
	return p
}

// excessOrder sorts the members a scale-down removes first: not Ready, then the newest.
func excessOrder(active []Member) []Member {
	out := slices.Clone(active)
	slices.SortStableFunc(out, func(a, b Member) int {
		if a.Ready != b.Ready {
			if !a.Ready {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.Created.UnixNano(), a.Created.UnixNano())
	})
	return out
}

// Batches splits n creations into slow-start batches 1, 2, 4, ...: a broken template costs one
// failed call, not n.
func Batches(n int) []int {
	var out []int
	for size := 1; n > 0; size *= 2 {
		b := min(size, n)
		out = append(out, b)
		n -= b
	}
	return out
}
