package admission_test

import (
	"fmt"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// running is an admitted workload in a scenario.
type running struct {
	name, queue, priority string
	shares                int64
}

// wl builds a workload on card "c" asking only shares.
func wl(s *admission.Snapshot, p *policy.Policy, name, queue, priority string, shares int64) *admission.Workload {
	return s.NewWorkload(admission.Workload{Name: name, Queue: queue, Card: "c", Priority: priority,
		Value: p.Priorities[priority].Value, Request: policy.Request{Shares: shares}})
}

func admit(t *testing.T, s *admission.Snapshot, p *policy.Policy, rs []running) {
	t.Helper()
	for _, r := range rs {
		w := wl(s, p, r.name, r.queue, r.priority, r.shares)
		if !s.Fits(w) {
			t.Fatalf("setup: %s does not fit in %s", r.name, r.queue)
		}
		s.Add(w)
	}
}

var shares = admission.FlavorResource{Card: "c", Kind: policy.Shares}

// threeQueues is a cohort of three on one card "c": a lends 2 of its 6
// shares (keeps 4), b owns 4 and lends all, z owns nothing and may borrow
// up to 3.
func threeQueues() *policy.Policy {
	return MakePolicy("three").Card("c", 24576, 10).DefaultPriority("low", 10).
		Queue(MakeQueue("a").Cohort("co").Flavor(MakeFlavor("c").Shares(6).LendingLimit(policy.Shares, 2))).
		Queue(MakeQueue("b").Cohort("co").Flavor(MakeFlavor("c").Shares(4))).
		Queue(MakeQueue("z").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 3))).
		Obj()
}

// TestAvailable checks the quota arithmetic against hand-computed values
// (resource_node.go's available / potentialAvailable).
func TestAvailable(t *testing.T) {
	cases := map[string]struct {
		policy    *policy.Policy
		running   []running
		available map[string]int64
		potential map[string]int64
	}{
		"no cohort: nominal minus usage": {
			policy:    MakePolicy("p").Card("c", 1, 8).DefaultPriority("low", 1).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(4))).Obj(),
			running:   []running{{"w1", "q", "low", 3}},
			available: map[string]int64{"q": 1},
			potential: map[string]int64{"q": 4},
		},
		"cohort of three, lending limit, empty": {
			// pool = a's 2 lendable + b's 4 = 6; a also keeps 4 local.
			policy:    threeQueues(),
			available: map[string]int64{"a": 10, "b": 6, "z": 3},
			potential: map[string]int64{"a": 10, "b": 6, "z": 3},
		},
		"cohort of three: z borrows 3": {
			policy:    threeQueues(),
			running:   []running{{"z1", "z", "low", 3}},
			available: map[string]int64{"a": 7, "b": 3, "z": 0},
		},
		"cohort of three: a uses its 4 local and 1 from the pool": {
			// pool usage = z's 3 + a's 1 beyond local = 4.
			policy:    threeQueues(),
			running:   []running{{"z1", "z", "low", 3}, {"a1", "a", "low", 5}},
			available: map[string]int64{"a": 2, "b": 2, "z": 0},
		},
		"cohort of three: b borrows the whole pool, a keeps its local 4": {
			policy:    threeQueues(),
			running:   []running{{"b1", "b", "low", 6}},
			available: map[string]int64{"a": 4, "b": 0, "z": 0},
		},
		"borrowing limit caps what a queue takes from the pool": {
			policy: MakePolicy("p").Card("c", 1, 8).DefaultPriority("low", 1).
				Queue(MakeQueue("x").Cohort("co").Flavor(MakeFlavor("c").Shares(4))).
				Queue(MakeQueue("y").Cohort("co").Flavor(MakeFlavor("c").Shares(4).BorrowingLimit(policy.Shares, 1))).Obj(),
			running:   []running{{"y1", "y", "low", 5}},
			available: map[string]int64{"x": 3, "y": 0},
			potential: map[string]int64{"x": 8, "y": 5},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkAvailable(t, tc.policy, tc.running, tc.available, tc.potential)
		})
	}
}

func TestTwoFlavorsAreIndependent(t *testing.T) {
	p := MakePolicy("p").Card("c", 1, 8).Card("d", 1, 2).DefaultPriority("low", 1).
		Queue(MakeQueue("q").Cohort("co").Flavor(MakeFlavor("c").Shares(8)).Flavor(MakeFlavor("d").Shares(2))).
		Queue(MakeQueue("r").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 4))).Obj()
	s := admission.NewSnapshot(p)
	admit(t, s, p, []running{{"r1", "r", "low", 4}, {"q1", "q", "low", 4}})
	d := admission.FlavorResource{Card: "d", Kind: policy.Shares}
	if got := s.Available("q", d); got != 2 {
		t.Errorf("Available(q, d) = %d, want 2: usage of card c does not touch card d", got)
	}
	if got := s.Available("r", d); got != 0 {
		t.Errorf("Available(r, d) = %d, want 0: r has no quota for card d", got)
	}
	if got := s.Available("q", shares); got != 0 {
		t.Errorf("Available(q, c) = %d, want 0", got)
	}
}

// TestDecide runs Kueue's classical preemption (preemption.go,
// classical/*.go) on small cohorts.
func TestDecide(t *testing.T) {
	ladder := func(w *PolicyWrapper) *PolicyWrapper {
		return w.Card("c", 1, 16).Priority("high", 100).Priority("mid", 50).DefaultPriority("low", 10)
	}
	// A shared-quota cohort: "owner" owns 4, "b1" and "b2" own nothing
	// and borrow. b2 may preempt while borrowing, up to "low".
	shared := func(b2 *QueueWrapper) *policy.Policy {
		return ladder(MakePolicy("shared")).
			Queue(MakeQueue("owner").Cohort("co").Flavor(MakeFlavor("c").Shares(4)).Preemption("LowerPriority", "LowerPriority")).
			Queue(MakeQueue("b1").Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 4))).
			Queue(b2.Cohort("co").Flavor(MakeFlavor("c").BorrowingLimit(policy.Shares, 4))).Obj()
	}
	type want struct {
		outcome admission.Outcome
		targets []string // "name/Reason"
	}
	cases := map[string]struct {
		policy   *policy.Policy
		running  []running
		incoming running
		// incomingFirst creates the incoming workload before the running
		// ones (for LowerOrNewerEqualPriority).
		incomingFirst bool
		want          want
	}{
		"fits": {
			policy:   ladder(MakePolicy("p")).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2))).Obj(),
			running:  []running{{"l1", "q", "low", 1}},
			incoming: running{"new", "q", "low", 1},
			want:     want{outcome: admission.Admit},
		},
		"withinClusterQueue LowerPriority evicts the most recently admitted lower workload": {
			policy:   ladder(MakePolicy("p")).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2)).Preemption("LowerPriority", "Never")).Obj(),
			running:  []running{{"l1", "q", "low", 1}, {"l2", "q", "low", 1}},
			incoming: running{"new", "q", "high", 1},
			want:     want{admission.Preempt, []string{"l2/InClusterQueue"}},
		},
		"withinClusterQueue LowerPriority does not evict an equal priority": {
			policy:   ladder(MakePolicy("p")).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2)).Preemption("LowerPriority", "Never")).Obj(),
			running:  []running{{"l1", "q", "low", 1}, {"l2", "q", "low", 1}},
			incoming: running{"new", "q", "low", 1},
			want:     want{outcome: admission.Wait},
		},
		"withinClusterQueue LowerOrNewerEqualPriority evicts a newer equal": {
			policy:        ladder(MakePolicy("p")).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(1)).Preemption("LowerOrNewerEqualPriority", "Never")).Obj(),
			running:       []running{{"l1", "q", "low", 1}},
			incoming:      running{"old", "q", "low", 1},
			incomingFirst: true,
			want:          want{admission.Preempt, []string{"l1/InClusterQueue"}},
		},
		"reclaimWithinCohort takes back a lent share from a lower-priority borrower": {
			policy:   shared(MakeQueue("b2")),
			running:  []running{{"o1", "owner", "high", 2}, {"b", "b1", "mid", 2}},
			incoming: running{"new", "owner", "high", 1},
			want:     want{admission.Preempt, []string{"b/InCohortReclamation"}},
		},
		"reclaimWithinCohort LowerPriority does not evict a higher-priority borrower": {
			policy:   shared(MakeQueue("b2")),
			running:  []running{{"o1", "owner", "low", 2}, {"b", "b1", "mid", 2}},
			incoming: running{"new", "owner", "low", 1},
			want:     want{outcome: admission.Wait},
		},
		"borrowWithinCohort evicts a low job in a borrowing queue": {
			policy:   shared(MakeQueue("b2").Preemption("Never", "LowerPriority").BorrowWithinCohort("LowerPriority", "low")),
			running:  []running{{"o1", "owner", "high", 2}, {"b", "b1", "low", 2}},
			incoming: running{"new", "b2", "mid", 1},
			want:     want{admission.Preempt, []string{"b/InCohortReclaimWhileBorrowing"}},
		},
		"borrowWithinCohort: maxPriorityThreshold protects a mid job": {
			policy:   shared(MakeQueue("b2").Preemption("Never", "LowerPriority").BorrowWithinCohort("LowerPriority", "low")),
			running:  []running{{"o1", "owner", "high", 2}, {"b", "b1", "mid", 2}},
			incoming: running{"new", "b2", "high", 1},
			want:     want{outcome: admission.Wait},
		},
		"borrowWithinCohort never evicts in a queue within its nominal quota (kueue#10171)": {
			policy:   shared(MakeQueue("b2").Preemption("Never", "LowerPriority").BorrowWithinCohort("LowerPriority", "low")),
			running:  []running{{"o1", "owner", "low", 4}},
			incoming: running{"new", "b2", "mid", 1},
			want:     want{outcome: admission.Wait},
		},
		"borrowWithinCohort alone collects no victims (reclaimWithinCohort Never)": {
			policy:   shared(MakeQueue("b2").BorrowWithinCohort("LowerPriority", "low")),
			running:  []running{{"o1", "owner", "high", 2}, {"b", "b1", "low", 2}},
			incoming: running{"new", "b2", "mid", 1},
			want:     want{outcome: admission.Wait},
		},
		"no preemption is tried for a request above the queue's nominal quota without borrowWithinCohort": {
			policy:   shared(MakeQueue("b2").Preemption("LowerPriority", "Any")),
			running:  []running{{"o1", "owner", "high", 2}, {"b", "b1", "low", 2}},
			incoming: running{"new", "b2", "high", 1},
			want:     want{outcome: admission.Wait},
		},
		"a request above what the queue could ever hold never fits": {
			policy:   ladder(MakePolicy("p")).Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2)).Preemption("LowerPriority", "Never")).Obj(),
			incoming: running{"big", "q", "high", 3},
			want:     want{outcome: admission.NoFit},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := admission.NewSnapshot(tc.policy)
			var in *admission.Workload
			if tc.incomingFirst {
				in = wl(s, tc.policy, tc.incoming.name, tc.incoming.queue, tc.incoming.priority, tc.incoming.shares)
			}
			admit(t, s, tc.policy, tc.running)
			if in == nil {
				in = wl(s, tc.policy, tc.incoming.name, tc.incoming.queue, tc.incoming.priority, tc.incoming.shares)
			}
			before := map[string]int64{}
			for _, q := range tc.policy.QueueNames() {
				before[q] = s.Usage(q, shares)
			}
			d := s.Decide(in)
			if d.Outcome != tc.want.outcome {
				t.Fatalf("outcome %s, want %s (targets %v)", d.Outcome, tc.want.outcome, names(d.Targets))
			}
			if got := names(d.Targets); fmt.Sprint(got) != fmt.Sprint(tc.want.targets) {
				t.Errorf("targets %v, want %v", got, tc.want.targets)
			}
			for _, q := range tc.policy.QueueNames() {
				if s.Usage(q, shares) != before[q] {
					t.Errorf("Decide changed %s's usage: %d → %d", q, before[q], s.Usage(q, shares))
				}
			}
		})
	}
}

func names(ts []admission.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Workload.Name+"/"+t.Reason)
	}
	return out
}

// TestLabSnapshot: the lab's numbers at the arithmetic level.
func TestLabSnapshot(t *testing.T) {
	p := Lab().Obj()
	s := admission.NewSnapshot(p)
	for _, n := range p.ServiceNames() {
		sv := p.Services[n]
		w := s.NewWorkload(admission.Workload{Name: n, Service: n, Queue: sv.Queue, Card: sv.Card,
			Priority: sv.Priority, Value: p.Priorities[sv.Priority].Value, Request: sv.Request})
		if !s.Fits(w) {
			t.Fatalf("%s does not fit", n)
		}
		s.Add(w)
	}
	gm := admission.FlavorResource{Card: "rtx-5060-ti", Kind: policy.GPUMemory}
	if got := s.Available("gpu-general", gm); got != 404 {
		t.Errorf("GPU memory left to gpu-general with the 7B up: %d MiB, want 404", got)
	}
	if !s.Borrowing("gpu-large-model", gm) || s.Borrowing("gpu-general", gm) {
		t.Error("want gpu-large-model borrowing and gpu-general not")
	}
	fr := admission.FlavorResource{Card: "rtx-5060-ti", Kind: policy.Shares}
	if s.CanBorrow("gpu-general", fr) {
		t.Error("gpu-general owns the card; it can never borrow")
	}
	if !s.CanBorrow("gpu-large-model", fr) {
		t.Error("gpu-large-model borrows its share")
	}
}
