package warmpool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ready(name string, age time.Duration) Member {
	return Member{Name: name, UID: uidOf(name), ResourceVersion: "rv-" + name, Owned: true, Ready: true, LaunchTypeWarm: true, Created: t0.Add(-age)}
}

func notReady(name string, age time.Duration) Member {
	m := ready(name, age)
	m.Ready = false
	return m
}

func uidOf(name string) types.UID { return types.UID("uid-" + name) }

func with(m Member, f func(*Member)) Member { f(&m); return m }

func TestMake(t *testing.T) {
	base := Input{Desired: 3, MaxBatch: 300, TemplateKnown: true, ExpectationsSatisfied: true, Grace: 5 * time.Minute, Now: t0}
	in := func(f func(*Input)) Input { i := base; f(&i); return i }
	tests := []struct {
		name    string
		members []Member
		in      Input
		want    Plan
	}{
		{
			name: "empty pool creates the desired count",
			in:   base,
			want: Plan{Create: 3},
		},
		{
			name: "batch size caps creates",
			in:   in(func(i *Input) { i.MaxBatch = 2 }),
			want: Plan{Create: 2},
		},
		{
			name:    "unobserved writes block creates but status is still reported",
			members: []Member{ready("a", time.Minute)},
			in:      in(func(i *Input) { i.ExpectationsSatisfied = false }),
			want:    Plan{Replicas: 1, ReadyReplicas: 1},
		},
		{
			name: "missing template creates nothing",
			in:   in(func(i *Input) { i.TemplateKnown = false }),
			want: Plan{},
		},
		{
			name:    "terminating members count towards the total",
			members: []Member{ready("a", time.Minute), with(ready("b", time.Minute), func(m *Member) { m.Deleting = true }), with(ready("c", time.Minute), func(m *Member) { m.DeletePending = true })},
			in:      base,
			want:    Plan{Replicas: 1, ReadyReplicas: 1},
		},
		{
			name:    "stale members are replaced under Recreate",
			members: []Member{with(ready("a", time.Minute), func(m *Member) { m.Stale = true }), ready("b", time.Minute), ready("c", time.Minute)},
			in:      in(func(i *Input) { i.Recreate = true }),
			want:    Plan{Delete: []Deletion{{Name: "a", UID: uidOf("a"), ResourceVersion: "rv-a", Owned: true, Reason: DeleteStale}}, Replicas: 2, ReadyReplicas: 2},
		},
		{
			name:    "stale members stay under OnReplenish",
			members: []Member{with(ready("a", time.Minute), func(m *Member) { m.Stale = true }), ready("b", time.Minute), ready("c", time.Minute)},
			in:      base,
			want:    Plan{Replicas: 3, ReadyReplicas: 3},
		},
		{
			name: "fresh orphans are adopted, stale ones deleted",
			members: []Member{
				with(ready("a", time.Minute), func(m *Member) { m.Owned = false }),
				with(ready("b", time.Minute), func(m *Member) { m.Owned, m.Stale = false, true }),
				with(ready("c", time.Minute), func(m *Member) { m.LaunchTypeWarm = false }),
			},
			in: base,
			want: Plan{Adopt: []string{"a"}, Relabel: []string{"c"}, Delete: []Deletion{{Name: "b", UID: uidOf("b"), ResourceVersion: "rv-b", Reason: DeleteStale}},
				Replicas: 2, ReadyReplicas: 2},
		},
		{
			name:    "young not-Ready members are kept and rechecked at the end of their grace",
			members: []Member{notReady("a", time.Minute), notReady("b", 2*time.Minute), ready("c", time.Hour)},
			in:      base,
			want:    Plan{Replicas: 3, ReadyReplicas: 1, Starting: 2, RecheckAt: t0.Add(3 * time.Minute)},
		},
		{
			name:    "stuck members are replaced, unschedulable ones held",
			members: []Member{notReady("a", time.Hour), with(notReady("b", time.Hour), func(m *Member) { m.Unschedulable = true }), ready("c", time.Hour)},
			in:      base,
			want: Plan{Delete: []Deletion{{Name: "a", UID: uidOf("a"), ResourceVersion: "rv-a", Owned: true, Reason: DeleteStuck}},
				Replicas: 2, ReadyReplicas: 1, Unschedulable: 1},
		},
		{
			name: "incompatible members are held and reported at once, the first by name",
			members: []Member{with(notReady("b", time.Second), func(m *Member) { m.Incompatible = "no bash" }),
				with(notReady("a", time.Hour), func(m *Member) { m.Incompatible = "root" }), ready("c", time.Hour)},
			in:   base,
			want: Plan{Replicas: 3, ReadyReplicas: 1, Incompatible: 2, IncompatibleMessage: "a: root"},
		},
		{
			name: "a template change replaces incompatible members under OnReplenish",
			members: []Member{with(notReady("a", time.Hour), func(m *Member) { m.Incompatible, m.Stale = "root", true }),
				with(ready("b", time.Hour), func(m *Member) { m.Stale = true })},
			in: in(func(i *Input) { i.Desired = 2 }),
			want: Plan{Delete: []Deletion{{Name: "a", UID: uidOf("a"), ResourceVersion: "rv-a", Owned: true, Reason: DeleteStale}},
				Replicas: 1, ReadyReplicas: 1},
		},
		{
			name:    "scale-down removes not-Ready members first, then the newest",
			members: []Member{ready("old", time.Hour), ready("new", time.Minute), notReady("slow", time.Second), ready("mid", 30*time.Minute)},
			in:      in(func(i *Input) { i.Desired = 2 }),
			want: Plan{Delete: []Deletion{{Name: "slow", UID: uidOf("slow"), ResourceVersion: "rv-slow", Owned: true, Reason: DeleteExcess}, {Name: "new", UID: uidOf("new"), ResourceVersion: "rv-new", Owned: true, Reason: DeleteExcess}},
				Replicas: 4, ReadyReplicas: 3, Starting: 1, RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
		{
			name: "max starting: an empty pool has nothing to spare and starts every member",
			in:   in(func(i *Input) { i.Desired, i.MaxStarting = 5, 2 }),
			want: Plan{Create: 5, CapLifted: true},
		},
		{
			name:    "max starting: with half the pool Ready, members still starting use up the cap; Ready ones do not",
			members: []Member{notReady("a", time.Second), ready("b", time.Minute), ready("c", time.Minute), ready("d", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 6, 2 }),
			want:    Plan{Create: 1, HeldStarting: 1, Replicas: 4, ReadyReplicas: 3, Starting: 1, RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
		{
			name:    "max starting: one Ready member short of half lifts the cap",
			members: []Member{notReady("a", time.Second), ready("b", time.Minute), ready("c", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 6, 2 }),
			want:    Plan{Create: 3, CapLifted: true, Replicas: 3, ReadyReplicas: 2, Starting: 1, RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
		{
			name:    "max starting: a pool of 3 with 2 Ready refills one at a time",
			members: []Member{ready("b", time.Minute), ready("c", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 3, 1 }),
			want:    Plan{Create: 1, Replicas: 2, ReadyReplicas: 2},
		},
		{
			name:    "max starting: a pool of 3 with 1 Ready starts both missing members",
			members: []Member{ready("c", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 3, 1 }),
			want:    Plan{Create: 2, CapLifted: true, Replicas: 1, ReadyReplicas: 1},
		},
		{
			name:    "max starting: a full cap holds every create until a member is Ready",
			members: []Member{notReady("a", time.Second), notReady("b", time.Second), ready("c", time.Minute), ready("d", time.Minute), ready("e", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 6, 2 }),
			want:    Plan{HeldStarting: 1, Replicas: 5, ReadyReplicas: 3, Starting: 2, RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
		{
			name: "max starting: unschedulable and incompatible members start nothing and do not count",
			members: []Member{with(notReady("u", time.Second), func(m *Member) { m.Unschedulable = true }),
				with(notReady("i", time.Second), func(m *Member) { m.Incompatible = "no sandboxd" }),
				ready("r", time.Minute), ready("s", time.Minute), ready("t", time.Minute)},
			in:   in(func(i *Input) { i.Desired, i.MaxStarting = 6, 1 }),
			want: Plan{Create: 1, Replicas: 5, ReadyReplicas: 3, Incompatible: 1, IncompatibleMessage: "i: no sandboxd", RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
		{
			name:    "SpareReady: exactly half of an odd pool, rounded up, is not enough",
			members: []Member{ready("a", time.Minute), ready("b", time.Minute)},
			in:      in(func(i *Input) { i.Desired, i.MaxStarting = 5, 1 }),
			want:    Plan{Create: 3, CapLifted: true, Replicas: 2, ReadyReplicas: 2},
		},
		{
			name:    "max starting 0 caps nothing",
			members: []Member{notReady("a", time.Second), notReady("b", time.Second)},
			in:      in(func(i *Input) { i.Desired = 5 }),
			want:    Plan{Create: 3, Replicas: 2, Starting: 2, RecheckAt: t0.Add(5*time.Minute - time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Make(tt.members, tt.in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Make (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBatches(t *testing.T) {
	tests := []struct {
		n    int
		want []int
	}{{0, nil}, {1, []int{1}}, {3, []int{1, 2}}, {10, []int{1, 2, 4, 3}}, {300, []int{1, 2, 4, 8, 16, 32, 64, 128, 45}}}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Batches(tt.n), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Batches(%d) (-want +got):\n%s", tt.n, diff)
		}
	}
}

func TestExpectations(t *testing.T) {
	now := t0
	e := NewExpectations(func() time.Time { return now })
	const pool = "ns/pool"
	if !e.Satisfied(pool) {
		t.Fatal("a pool with no expectations is not satisfied")
	}
	e.ExpectCreates(pool, 2)
	e.CreationObserved(pool)
	if e.Satisfied(pool) {
		t.Error("satisfied with one of two creates unobserved")
	}
	e.CreationObserved(pool)
	e.CreationObserved(pool) // a stray event must not go negative and hide the next create
	e.ExpectCreates(pool, 1)
	if e.Satisfied(pool) {
		t.Error("a stray creation event satisfied a later create")
	}
	e.CreationObserved(pool)

	e.ExpectDelete(pool, "u1")
	if !e.DeletePending(pool, "u1") || e.Satisfied(pool) {
		t.Error("expected delete not pending")
	}
	e.DeletionObserved(pool, "u1")
	if e.DeletePending(pool, "u1") || !e.Satisfied(pool) {
		t.Error("observed delete still pending")
	}

	e.ExpectCreates(pool, 1)
	now = now.Add(ExpectationsTimeout + time.Second)
	if !e.Satisfied(pool) {
		t.Error("expectations did not expire")
	}
	e.ExpectCreates(pool, 1)
	e.CreationObserved(pool)
	if !e.Satisfied(pool) {
		t.Error("expired counts leaked into new expectations")
	}
	e.ExpectCreates(pool, 1)
	e.Forget(pool)
	if !e.Satisfied(pool) {
		t.Error("Forget kept expectations")
	}
}

func TestExpectationsWaitForTheList(t *testing.T) {
	e := NewExpectations(time.Now)
	const pool = "ns/pool"
	e.ExpectCreates(pool, 2)
	e.Created(pool, "a")
	e.Created(pool, "b")
	e.CreationObserved(pool)
	e.CreationObserved(pool)
	if e.Satisfied(pool) {
		t.Fatal("satisfied on watch events alone, while the list shows neither member")
	}
	e.Listed(pool, []types.UID{"a", "x"})
	if e.Satisfied(pool) {
		t.Fatal("satisfied while member b is still unlisted")
	}
	e.Left(pool, "b") // adopted by a claim before any list showed it
	if !e.Satisfied(pool) {
		t.Fatal("not satisfied once every created member was listed or left")
	}
}
