package admission

import (
	"cmp"
	"slices"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Kueue's reasons on a preempted Workload's Preempted condition
// (apis/kueue/v1beta2/workload_types.go).
const (
	// ReasonInClusterQueue: preempted by withinClusterQueue.
	ReasonInClusterQueue = "InClusterQueue"
	// ReasonInCohortReclamation: preempted by reclaimWithinCohort, the
	// preemptor reclaiming quota its queue lent to the cohort.
	ReasonInCohortReclamation = "InCohortReclamation"
	// ReasonInCohortReclaimWhileBorrowing: preempted by borrowWithinCohort,
	// the preemptor borrowing.
	ReasonInCohortReclaimWhileBorrowing = "InCohortReclaimWhileBorrowing"
)

// PolicyOf names the preemption setting behind a Kueue reason.
func PolicyOf(reason string) string {
	switch reason {
	case ReasonInClusterQueue:
		return "withinClusterQueue"
	case ReasonInCohortReclamation:
		return "reclaimWithinCohort"
	case ReasonInCohortReclaimWhileBorrowing:
		return "borrowWithinCohort"
	}
	return ""
}

// Target is a workload Kueue would evict to admit another, and why.
type Target struct {
	Workload *Workload
	Reason   string
}

// Outcome is what Kueue's scheduler does with a pending workload in one
// cycle.
type Outcome int

const (
	// Admit: it fits; quota is reserved now.
	Admit Outcome = iota
	// Preempt: it fits once Targets are evicted; Kueue evicts them and
	// admits it in a later cycle.
	Preempt
	// Wait: it does not fit and no preemption is possible; the pod stays
	// held until quota frees up.
	Wait
	// NoFit: a request exceeds what the queue could ever hold
	// (PotentialAvailable); Kueue never admits it.
	NoFit
)

func (o Outcome) String() string {
	return [...]string{"admit", "preempt", "wait", "no-fit"}[o]
}

// Decision is the outcome of Decide.
type Decision struct {
	Outcome Outcome
	// Targets are the evictions Kueue issues (Outcome Preempt).
	Targets []Target
	// Short lists the resources the workload does not fit in now
	// (request > Available), in Kinds order; for NoFit, the ones above
	// PotentialAvailable.
	Short []FlavorResource
}

// Decide is one scheduling attempt for w, as Kueue v0.17's scheduler makes
// it with classical preemption (docs:
// https://kueue.sigs.k8s.io/docs/concepts/preemption/; code:
// pkg/scheduler/scheduler.go, flavorassigner, preemption):
//
//  1. Fit: every request ≤ Available → admitted.
//  2. NoFit: some request > PotentialAvailable → never admitted
//     (flavorassigner.fitsResourceQuota, "insufficient quota ... > maximum
//     capacity").
//  3. Preemption is only attempted for a resource if the request fits the
//     queue's own nominal quota, or fits without borrowing in a subtree of
//     its cohort tree below the root, or borrowWithinCohort is enabled
//     (fitsResourceQuota: val <= rQuota.Nominal || mayReclaimInHierarchy ||
//     canPreemptWhileBorrowing; mayReclaimInHierarchy is
//     lowestSubtreeThatFits's, cohorts.go; in a flat cohort it implies
//     val <= nominal). Otherwise the workload waits.
//  4. Otherwise the preemptor's candidate search (classicalTargets); no
//     targets → the workload waits ("Workload requires preemption, but
//     there are no candidate workloads allowed for preemption").
//
// A workload that may land on several cards is first given one as Kueue's
// flavor assigner does (assignCard, flavors.go); the steps above then run
// on that card.
func (s *Snapshot) Decide(w *Workload) Decision {
	s.assignCard(w)
	cq := s.queue(w.Queue)
	var short, never []FlavorResource
	reqs := w.requests()
	for _, r := range reqs {
		if !cq.hasQuota(r.fr) || r.v > cq.potentialAvailable(r.fr) {
			never = append(never, r.fr)
			continue
		}
		if r.v > max(0, cq.available(r.fr)) {
			short = append(short, r.fr)
		}
	}
	if len(never) > 0 {
		return Decision{Outcome: NoFit, Short: never}
	}
	if len(short) == 0 {
		return Decision{Outcome: Admit}
	}
	bwc := borrowWithinCohortEnabled(cq.pre)
	var needs frSet
	for _, r := range reqs {
		for _, fr := range short {
			if r.fr == fr {
				if r.v > cq.quota(fr).Nominal && !cq.mayReclaim(fr, r.v) && !bwc {
					return Decision{Outcome: Wait, Short: short}
				}
				needs = needs.add(fr)
			}
		}
	}
	targets := s.classicalTargets(w, cq, needs)
	if len(targets) == 0 {
		return Decision{Outcome: Wait, Short: short}
	}
	return Decision{Outcome: Preempt, Targets: targets, Short: short}
}

func borrowWithinCohortEnabled(p policy.Preemption) bool {
	return p.BorrowWithinCohort != "" && p.BorrowWithinCohort != "Never"
}

func policyEnabled(p string) bool { return p != "" && p != "Never" }

// preemption variants (classical/hierarchical_preemption.go).
type pvariant int

const (
	withinCQ pvariant = iota + 1
	// hierarchicalReclaim: the preemptor fits its own nominal quota; it
	// reclaims what it lent, whatever the borrowWithinCohort setting.
	hierarchicalReclaim
	// reclaimWithoutBorrowing: may only be evicted if the preemptor then
	// fits without borrowing.
	reclaimWithoutBorrowing
	// reclaimWhileBorrowing: may be evicted even though the preemptor
	// borrows (borrowWithinCohort, priority ≤ maxPriorityThreshold).
	reclaimWhileBorrowing
)

func (v pvariant) reason() string {
	switch v {
	case withinCQ:
		return ReasonInClusterQueue
	case reclaimWhileBorrowing:
		return ReasonInCohortReclaimWhileBorrowing
	default:
		return ReasonInCohortReclamation
	}
}

type candidate struct {
	w  *Workload
	cq *clusterQueue
	v  pvariant
	// lca is the cohort at which a candidate of another queue was found
	// (its lowest common ancestor with the preemptor's queue; nil for a
	// same-queue candidate): candidateValid checks the cohorts below it.
	lca *cohort
}

// satisfiesPolicy is preemptioncommon.SatisfiesPreemptionPolicy (the
// SchedulerTimestampPreemptionBuffer gate is alpha and off in v0.17):
//
//   - LowerPriority: the candidate's priority is strictly lower;
//   - LowerOrNewerEqualPriority: lower, or equal and created after the
//     preemptor;
//   - Any: always; Never: never.
func satisfiesPolicy(pol string, preemptor, cand *Workload) bool {
	switch pol {
	case "LowerPriority":
		return preemptor.Value > cand.Value
	case "LowerOrNewerEqualPriority":
		return preemptor.Value > cand.Value || (preemptor.Value == cand.Value && preemptor.Seq < cand.Seq)
	case "Any":
		return true
	}
	return false
}

// withinNominal is schdcache.IsWithinNominalInResources: usage ≤ nominal
// in every resource that needs preemption.
func withinNominal(cq *clusterQueue, needs frSet) bool {
	for _, fr := range needs {
		if cq.used(fr) > cq.quota(fr).Nominal {
			return false
		}
	}
	return true
}

func usesNeeded(w *Workload, needs frSet) bool {
	for _, k := range policy.Kinds {
		if w.Request.Get(k) > 0 && needs.has(FlavorResource{w.Card, k}) {
			return true
		}
	}
	return false
}

// classicalTargets is Preemptor.classicalPreemptions
// (https://kueue.sigs.k8s.io/docs/concepts/preemption/: withinClusterQueue
// preempts in the queue; reclaimWithinCohort lets a workload that fits its
// queue's nominal quota preempt workloads of queues in the cohort that use
// more than theirs; borrowWithinCohort
// lets a borrowing workload preempt lower-priority workloads, up to
// maxPriorityThreshold, again only in queues above their nominal quota:
// kubernetes-sigs/kueue#10171, clarified in the docs by #10210).
//
// Candidates (classical.NewCandidateIterator):
//   - same queue: withinClusterQueue ≠ Never, the candidate satisfies it;
//   - other queues of the cohort tree, only when reclaimWithinCohort ≠
//     Never (collectCandidatesForHierarchicalReclaim returns nothing
//     otherwise: borrowWithinCohort alone collects no candidate), and only
//     in queues that are above their nominal quota in a resource that
//     needs preemption, under cohorts above their SubtreeQuota
//     (collectCandidatesInSubtree skips queues within nominal —
//     kubernetes-sigs/kueue#10171 — and subtrees within quota), level by
//     level from the queue's cohort to the root (hierarchicalCandidates,
//     cohorts.go). The candidate must satisfy reclaimWithinCohort; it is a
//     hierarchical reclaim when the preemptor fits its own nominal quota
//     or, for candidates found higher up, a lower subtree on its path
//     holds the request, else reclaim-while-borrowing when
//     borrowWithinCohort allows it (candidate priority lower than the
//     preemptor's and ≤ maxPriorityThreshold), else reclaim-without-
//     borrowing.
//
// Each list is ordered by CandidatesOrdering (other queues first, lower
// priority first, most recently admitted first), then the three are
// concatenated: hierarchical, priority, same-queue. The search removes
// candidates in order until the preemptor fits (workloadFits), then adds
// back what is not needed (fillBackWorkloads). It tries "borrowing allowed"
// and "not borrowing" in the order classicalPreemptions chooses.
func (s *Snapshot) classicalTargets(w *Workload, cq *clusterQueue, needs frSet) []Target {
	sc := &s.cands
	same := sc.same[:0]
	if policyEnabled(cq.pre.WithinClusterQueue) {
		for _, x := range cq.workloads {
			if usesNeeded(x, needs) && satisfiesPolicy(cq.pre.WithinClusterQueue, w, x) {
				same = append(same, candidate{w: x, cq: cq, v: withinCQ})
			}
		}
	}
	bwcForbidden := !borrowWithinCohortEnabled(cq.pre)
	hier, prio := s.hierarchicalCandidates(w, cq, needs, sc.hier[:0], sc.prio[:0])
	order := func(cs []candidate) {
		slices.SortStableFunc(cs, func(a, b candidate) int {
			if (a.cq == cq) != (b.cq == cq) {
				if b.cq == cq {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(a.w.Value, b.w.Value); c != 0 {
				return c
			}
			if c := cmp.Compare(b.w.Admitted, a.w.Admitted); c != 0 {
				return c
			}
			return cmp.Compare(a.w.Seq, b.w.Seq)
		})
	}
	order(hier)
	order(prio)
	order(same)
	all := append(append(append(sc.all[:0], hier...), prio...), same...)
	sc.same, sc.hier, sc.prio, sc.all = same, hier, prio, all
	if len(all) == 0 {
		return nil
	}

	underNominal := true
	for _, fr := range needs {
		if cq.used(fr) >= cq.quota(fr).Nominal {
			underNominal = false
		}
	}
	var attempts []bool // allowBorrowing per attempt
	switch {
	case len(hier) == 0 && len(prio) == 0 || (bwcForbidden && !underNominal):
		attempts = []bool{true}
	case bwcForbidden && len(hier) == 0:
		attempts = []bool{false, true}
	default:
		attempts = []bool{true, false}
	}
	for _, borrow := range attempts {
		removed := sc.removed[:0]
		for _, c := range all {
			if !candidateValid(c, cq, borrow, needs) {
				continue
			}
			s.Remove(c.w)
			removed = append(removed, c)
			sc.removed = removed
			if s.workloadFits(w, cq, borrow) {
				removed = s.fillBack(w, cq, removed, borrow)
				out := make([]Target, len(removed))
				for i, t := range removed {
					s.restore(t.w)
					out[i] = Target{Workload: t.w, Reason: t.v.reason()}
				}
				return out
			}
		}
		for _, t := range removed {
			s.restore(t.w)
		}
	}
	return nil
}

// workloadFits is preemption.go's workloadFits: every request at most
// Available and, when borrowing is not allowed, within nominal quota.
func (s *Snapshot) workloadFits(w *Workload, cq *clusterQueue, allowBorrowing bool) bool {
	for _, r := range w.requests() {
		if !allowBorrowing && cq.used(r.fr)+r.v > cq.quota(r.fr).Nominal {
			return false
		}
		if r.v > max(0, cq.available(r.fr)) {
			return false
		}
	}
	return true
}

// fillBack is fillBackWorkloads: in reverse removal order (the last one is
// always needed), put back each target the preemptor still fits without.
func (s *Snapshot) fillBack(w *Workload, cq *clusterQueue, targets []candidate, borrow bool) []candidate {
	for i := len(targets) - 2; i >= 0; i-- {
		s.restore(targets[i].w)
		if s.workloadFits(w, cq, borrow) {
			targets[i] = targets[len(targets)-1]
			targets = targets[:len(targets)-1]
		} else {
			s.Remove(targets[i].w)
		}
	}
	return targets
}
