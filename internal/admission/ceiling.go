package admission

import (
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// Ceiling is the most GPU memory one workload in a ClusterQueue could ever
// declare and still be admitted and placed: a declaration above MiB is
// never admitted by Kueue, or never fits a node of the card, whatever else
// runs. Units: MiB.
//
// The quota side is Kueue v0.17's own test for a workload that can never
// fit (sigs.k8s.io/kueue@v0.17.0,
// pkg/scheduler/flavorassigner/flavorassigner.go, fitsResourceQuota): a
// request above the ClusterQueue's PotentialAvailable
// (pkg/cache/scheduler/clusterqueue_snapshot.go; resource_node.go's
// potentialAvailable) is noFit, with the reason "insufficient quota for
// <resource> in flavor <flavor>, previously considered podsets requests
// (...) + current podset request (...) > maximum capacity (...)", and
// Kueue never admits it, not by waiting and not by preempting.
// PotentialAvailable is the queue's nominalQuota plus what it may borrow:
// up to its borrowingLimit, or, without one, all the cohort's other queues
// lend (Snapshot.PotentialAvailable). A queue has one such ceiling per
// flavor; the flavor assigner tries each, so the queue's is the largest.
//
// The node side: a flavor's nodes advertise the declaration resource at
// the card's memory times the cards per node (policy.Card.NodeDeclarationMiB,
// what reconcile's node readiness sets), and the kube-scheduler never binds
// a pod that requests more of a resource than a node has allocatable
// (NodeResourcesFit). With one card per node that is the card's physical
// memory.
type Ceiling struct {
	// Queue is the ClusterQueue; Card the flavor (card) whose ceiling is
	// the queue's.
	Queue string
	Card  string
	// MiB is the ceiling: min(QuotaMiB, NodeMiB) on Card.
	MiB int64
	// NominalMiB is the queue's nominalQuota of GPU memory on Card;
	// QuotaMiB its PotentialAvailable (nominal + what it may borrow).
	NominalMiB, QuotaMiB int64
	// NodeMiB is what each of Card's nodes advertises of the declaration.
	NodeMiB int64
	// Cohort is the queue's cohort ("" for none); BorrowingLimit its
	// borrowingLimit of GPU memory on Card (nil: none).
	Cohort         string
	BorrowingLimit *int64
	// Tree is whether Cohort is a declared Cohort object (quota of its
	// own, perhaps a parent): what the queue borrows comes from its tree,
	// not only from the other queues of the cohort.
	Tree bool
}

// BoundByNode reports whether the card's nodes, not the quota, set the
// ceiling.
func (c Ceiling) BoundByNode() bool { return c.NodeMiB < c.QuotaMiB }

// DeclarationCeiling returns the queue's Ceiling; false when the policy has
// no such queue or none of its flavors is a card of the policy.
func DeclarationCeiling(p *policy.Policy, queue string) (Ceiling, bool) {
	return ceilingIn(NewSnapshot(p), p, queue)
}

// DeclarationCeilings returns every queue's Ceiling, by queue name, from
// one snapshot of p (a snapshot per queue made render's admission policies
// quadratic in queues); queues without one are absent.
func DeclarationCeilings(p *policy.Policy) map[string]Ceiling {
	s := NewSnapshot(p)
	out := map[string]Ceiling{}
	for name := range p.Queues {
		if c, ok := ceilingIn(s, p, name); ok {
			out[name] = c
		}
	}
	return out
}

// ceilingIn is DeclarationCeiling read from snapshot s of p (read only).
func ceilingIn(s *Snapshot, p *policy.Policy, queue string) (Ceiling, bool) {
	q, ok := p.Queues[queue]
	if !ok {
		return Ceiling{}, false
	}
	var best Ceiling
	found := false
	for _, card := range q.FlavorNames() {
		c, ok := p.Cards[card]
		if !ok {
			continue
		}
		fr := FlavorResource{Card: card, Kind: policy.GPUMemory}
		quota := s.PotentialAvailable(queue, fr)
		ceil := Ceiling{
			Queue: queue, Card: card,
			NominalMiB: q.Flavors[card].GPUMemory.Nominal, QuotaMiB: quota,
			NodeMiB: c.NodeDeclarationMiB(),
			Cohort:  q.Cohort, BorrowingLimit: q.Flavors[card].GPUMemory.BorrowingLimit,
		}
		_, ceil.Tree = p.Cohorts[q.Cohort]
		ceil.MiB = min(quota, ceil.NodeMiB)
		if !found || ceil.MiB > best.MiB {
			best, found = ceil, true
		}
	}
	return best, found
}

// Words says where the ceiling comes from, in the lab's terms:
// "ClusterQueue gpu-large-model can hold at most 12,200 MiB on rtx-5060-ti:
// nominalQuota 0 MiB plus its borrowingLimit 12,200 MiB in cohort gpu".
func (c Ceiling) Words() string {
	mib := func(v int64) string { return policy.FormatAmount(policy.GPUMemory, v) }
	var from string
	borrow := c.QuotaMiB - c.NominalMiB
	switch {
	case c.Cohort == "":
		from = "its nominalQuota " + mib(c.NominalMiB) + " (no cohort to borrow from)"
	case borrow == 0 && c.Tree:
		from = "its nominalQuota " + mib(c.NominalMiB) + ", and cohort " + c.Cohort + "'s tree has nothing to lend it"
	case borrow == 0:
		from = "its nominalQuota " + mib(c.NominalMiB) + ", and the other queues of cohort " + c.Cohort + " have nothing to lend it"
	case c.BorrowingLimit != nil && borrow == *c.BorrowingLimit:
		from = "nominalQuota " + mib(c.NominalMiB) + " plus its borrowingLimit " + mib(borrow) + " in cohort " + c.Cohort
	case c.Tree:
		from = "nominalQuota " + mib(c.NominalMiB) + " plus the " + mib(borrow) + " cohort " + c.Cohort + "'s tree lends it (other queues' quota and the Cohorts' own)"
	default:
		from = "nominalQuota " + mib(c.NominalMiB) + " plus the " + mib(borrow) + " the other queues of cohort " + c.Cohort + " lend"
	}
	s := "ClusterQueue " + c.Queue + " can hold at most " + mib(c.QuotaMiB) + " on " + c.Card + ": " + from
	if c.BoundByNode() {
		s += "; and " + c.Card + "'s nodes advertise only " + mib(c.NodeMiB) + " of it, so no node takes more"
	}
	return s
}
