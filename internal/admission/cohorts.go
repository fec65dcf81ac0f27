package admission

import (
	"cmp"
	"slices"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// cohort is a node of a Kueue cohort tree: an implicit cohort (a
// cohortName no Cohort object declares: no quota of its own, no parent) or
// a Kueue v1beta2 Cohort with its own quota and, perhaps, a parent
// (hierarchical cohorts). Its children are the ClusterQueues whose
// cohortName names it (queues) and the Cohorts whose parentName names it
// (children). It is Kueue's cohort resource node
// (pkg/cache/scheduler/cohort.go, resource_node.go).
type cohort struct {
	name     string
	parent   *cohort
	children []*cohort
	queues   []*clusterQueue
	cells    []*poolCell
}

// poolCell is one FlavorResource of a cohort (Kueue's resourceNode for
// that FlavorResource): the cohort's own quota (a Cohort object's
// nominalQuota, borrowingLimit and lendingLimit; zero for an implicit
// cohort), its SubtreeQuota and its Usage, and the parent cohort's cell
// for the same FlavorResource (nil at the root).
type poolCell struct {
	fr      FlavorResource
	quota   policy.Quota
	subtree int64
	usage   int64
	parent  *poolCell
}

// pool returns the cohort's cell for fr, adding an empty one (and its
// ancestors' cells) when it has none.
func (co *cohort) pool(fr FlavorResource) *poolCell {
	for _, c := range co.cells {
		if c.fr == fr {
			return c
		}
	}
	c := &poolCell{fr: fr}
	if co.parent != nil {
		c.parent = co.parent.pool(fr)
	}
	co.cells = append(co.cells, c)
	return c
}

// root is the root of the cohort's tree.
func (co *cohort) root() *cohort {
	for co.parent != nil {
		co = co.parent
	}
	return co
}

// isAncestorOf reports whether co is x or one of x's ancestors.
func (co *cohort) isAncestorOf(x *cohort) bool {
	for ; x != nil; x = x.parent {
		if x == co {
			return true
		}
	}
	return false
}

// cohortNode returns the snapshot's cohort named name, adding it and its
// ancestors (policy.CohortPath) when missing, each with its own quota from
// the policy's Cohort object (none for an implicit cohort). A cycle of
// parents, which vet refuses (rule cohort-cycle) and under which Kueue
// admits nothing, is cut where it would close, so that the model's tree
// stays a tree.
func (s *Snapshot) cohortNode(name string) *cohort {
	if co := s.cohorts[name]; co != nil {
		return co
	}
	co := &cohort{name: name}
	s.cohorts[name] = co
	if pn := s.p.CohortParent(name); pn != "" {
		parent := s.cohortNode(pn)
		if !co.isAncestorOf(parent) {
			co.parent = parent
			parent.children = append(parent.children, co)
		}
	}
	if obj, ok := s.p.Cohorts[name]; ok {
		for _, card := range obj.FlavorNames() {
			for _, k := range policy.Kinds {
				co.pool(FlavorResource{card, k}).quota = obj.Flavors[card].Get(k)
			}
		}
	}
	return co
}

// updateSubtree is resource_node.go's updateCohortResourceNode for the
// quotas (usage starts at zero): a cohort's SubtreeQuota is its own
// nominalQuota plus what each child lends it (accumulateFromChild: the
// child's SubtreeQuota less its localQuota), child Cohorts first.
func (co *cohort) updateSubtree() {
	for _, c := range co.cells {
		c.subtree = c.quota.Nominal
	}
	for _, ch := range co.children {
		ch.updateSubtree()
		for _, c := range ch.cells {
			co.pool(c.fr).subtree += c.subtree - c.local()
		}
	}
	for _, cq := range co.queues {
		for i := range cq.cells {
			c := &cq.cells[i]
			c.pool.subtree += c.quota.Nominal - localQuota(c.quota)
		}
	}
}

// local is resource_node.go's localQuota for a cohort: the part of its
// SubtreeQuota it never lends to its parent, SubtreeQuota - lendingLimit
// (0 without a lending limit).
func (c *poolCell) local() int64 {
	if c.quota.LendingLimit != nil {
		return max(0, c.subtree-*c.quota.LendingLimit)
	}
	return 0
}

// localAvailable is resource_node.go's LocalAvailable: what is left of the
// cohort's local quota.
func (c *poolCell) localAvailable() int64 { return max(0, c.local()-c.usage) }

// available is resource_node.go's available for a cohort: at the root,
// SubtreeQuota - Usage; below it, what is left of its local quota plus
// what its parent has available, bounded by its borrowingLimit less what
// it already stores in the parent:
//
//	parentAvailable = available(parent)
//	if borrowingLimit != nil:
//	    parentAvailable = min(parentAvailable,
//	        (SubtreeQuota - local) - max(0, Usage - local) + borrowingLimit)
//	available = LocalAvailable + parentAvailable
//
// It may be negative (a tree above its quota).
func (c *poolCell) available() int64 {
	if c.parent == nil {
		return c.subtree - c.usage
	}
	parent := c.parent.available()
	if bl := c.quota.BorrowingLimit; bl != nil {
		stored := c.subtree - c.local()
		usedInParent := max(0, c.usage-c.local())
		parent = min(parent, stored-usedInParent+*bl)
	}
	return c.localAvailable() + parent
}

// potentialAvailable is resource_node.go's potentialAvailable for a
// cohort: with no usage anywhere, its local quota plus its parent's
// potential, bounded by SubtreeQuota + borrowingLimit.
func (c *poolCell) potentialAvailable() int64 {
	if c.parent == nil {
		return c.subtree
	}
	avail := c.local() + c.parent.potentialAvailable()
	if bl := c.quota.BorrowingLimit; bl != nil {
		avail = min(avail, c.subtree+*bl)
	}
	return avail
}

// addUsage is resource_node.go's addUsage for a cohort: the part of val
// beyond what is left of its local quota is stored in the parent.
func (c *poolCell) addUsage(val int64) {
	localAvail := c.localAvailable()
	c.usage += val
	if c.parent != nil && val > localAvail {
		c.parent.addUsage(val - localAvail)
	}
}

// removeUsage is resource_node.go's removeUsage for a cohort.
func (c *poolCell) removeUsage(val int64) {
	stored := c.usage - c.local()
	c.usage -= val
	if stored <= 0 || c.parent == nil {
		return
	}
	c.parent.removeUsage(min(val, stored))
}

// fitsInQuota is resource_node.go's QuantitiesFitInQuota for a cohort:
// whether Usage + v ≤ SubtreeQuota for every request, and the requests
// less what is left of its local quota (what its parent must hold),
// written over reqs.
func (co *cohort) fitsInQuota(reqs []frAmount) (bool, []frAmount) {
	fits := true
	rest := reqs
	for i, r := range reqs {
		c := co.pool(r.fr)
		if c.usage+r.v > c.subtree {
			fits = false
		}
		rest[i] = frAmount{r.fr, max(0, r.v-c.localAvailable())}
	}
	return fits, rest
}

// fitsInQuota is QuantitiesFitInQuota for a ClusterQueue (its
// SubtreeQuota is its nominalQuota); the rest is written over reqs.
func (cq *clusterQueue) fitsInQuota(reqs []frAmount) (bool, []frAmount) {
	fits := true
	rest := reqs
	for i, r := range reqs {
		c := cq.cell(r.fr)
		var usage, nominal, local int64
		if c != nil {
			usage, nominal, local = c.usage, c.quota.Nominal, localQuota(c.quota)
		}
		if usage+r.v > nominal {
			fits = false
		}
		rest[i] = frAmount{r.fr, max(0, r.v-max(0, local-usage))}
	}
	return fits, rest
}

// withinNominal is IsWithinNominalInResources for a cohort: Usage ≤
// SubtreeQuota in every resource that needs preemption.
func (co *cohort) withinNominal(needs frSet) bool {
	for _, fr := range needs {
		if c := co.pool(fr); c.usage > c.subtree {
			return false
		}
	}
	return true
}

// lowestSubtreeThatFits is classical.FindHeightOfLowestSubtreeThatFits:
// the height of the lowest subtree holding the queue in which val more of
// fr fits without borrowing — 0 for the queue itself (usage + val ≤
// nominal, or no cohort), else the first cohort on its path whose Usage
// plus what the levels below cannot hold (val less each level's
// LocalAvailable) stays within its SubtreeQuota (getNodeHeight: the
// distance to its furthest leaf), else the whole tree — and mayReclaim,
// whether that subtree is smaller than the whole tree (it has a parent).
// Kueue's flavor assigner (fitsResourceQuota) calls the height how much
// a flavor borrows, and tries preemption for a request above the queue's
// nominal quota only when mayReclaim holds or borrowWithinCohort is on. In
// a flat cohort the height is 0 or 1 and mayReclaim holds exactly when
// usage + val ≤ nominal.
func (cq *clusterQueue) lowestSubtreeThatFits(fr FlavorResource, val int64) (height int, mayReclaim bool) {
	if cq.cohort == nil {
		return 0, false
	}
	var usage int64
	var q policy.Quota
	if c := cq.cell(fr); c != nil {
		usage, q = c.usage, c.quota
	}
	if usage+val <= q.Nominal {
		return 0, true
	}
	remaining := val - max(0, localQuota(q)-usage)
	for node := cq.cohort; node != nil; node = node.parent {
		pc := node.pool(fr)
		if pc.usage+remaining <= pc.subtree {
			return node.height(), node.parent != nil
		}
		remaining -= pc.localAvailable()
	}
	return cq.cohort.root().height(), false
}

// mayReclaim is lowestSubtreeThatFits's mayReclaimInHierarchy.
func (cq *clusterQueue) mayReclaim(fr FlavorResource, val int64) bool {
	_, ok := cq.lowestSubtreeThatFits(fr, val)
	return ok
}

// height is classical.getNodeHeight: the distance from the cohort to its
// furthest leaf (1 for a cohort of ClusterQueues only).
func (co *cohort) height() int {
	h := min(len(co.queues)+len(co.children), 1)
	for _, ch := range co.children {
		h = max(h, ch.height()+1)
	}
	return h
}

// treeQueues lists every ClusterQueue of the cohort tree under co, in
// name order.
func (co *cohort) treeQueues() []*clusterQueue {
	var out []*clusterQueue
	var walk func(*cohort)
	walk = func(n *cohort) {
		out = append(out, n.queues...)
		for _, ch := range n.children {
			walk(ch)
		}
	}
	walk(co)
	slices.SortFunc(out, func(a, b *clusterQueue) int { return cmp.Compare(a.name, b.name) })
	return out
}

// hierarchicalCandidates is classical.collectCandidatesForHierarchicalReclaim:
// walking from the preemptor's cohort to the root, it collects, in each
// level's subtree not yet visited, the workloads of ClusterQueues above
// their nominal quota (collectCandidatesInSubtree: a child cohort within
// its SubtreeQuota in the resources that need preemption is skipped
// whole). The preemptor has a hierarchical advantage over the candidates
// of a level once it fits its own nominal quota, or once the requests fit
// the SubtreeQuota of a lower level on its path (QuantitiesFitInQuota,
// with what each level's local quota holds taken off): those are
// hierarchical-reclaim candidates (hier), the others are classified by
// priority (prio; classifyPreemptionVariant). Each candidate records the
// level it was found at (its lowest common ancestor with the preemptor),
// up to which candidateIsValid checks it is still above quota.
func (s *Snapshot) hierarchicalCandidates(w *Workload, cq *clusterQueue, needs frSet, hier, prio []candidate) ([]candidate, []candidate) {
	if cq.cohort == nil || !policyEnabled(cq.pre.ReclaimWithinCohort) {
		return hier, prio
	}
	adv, remaining := cq.fitsInQuota(w.requests())
	var prev *cohort
	for node := cq.cohort; node != nil; node = node.parent {
		list := &prio
		if adv {
			list = &hier
		}
		s.collectInSubtree(w, cq, node, node, prev, adv, needs, list)
		var fits bool
		fits, remaining = node.fitsInQuota(remaining)
		adv = adv || fits
		prev = node
	}
	return hier, prio
}

// collectInSubtree is classical.collectCandidatesInSubtree: the candidates
// under node, skipping the subtree skip (already visited), child cohorts
// within their SubtreeQuota, the preemptor's own queue and queues within
// their nominal quota.
func (s *Snapshot) collectInSubtree(w *Workload, cq *clusterQueue, node, lca, skip *cohort, adv bool, needs frSet, out *[]candidate) {
	for _, ch := range node.children {
		if ch == skip || ch.withinNominal(needs) {
			continue
		}
		s.collectInSubtree(w, cq, ch, lca, skip, adv, needs, out)
	}
	for _, other := range node.queues {
		if other == cq || withinNominal(other, needs) {
			continue
		}
		for _, x := range other.workloads {
			if v := classify(w, cq, x, adv, needs); v != 0 {
				*out = append(*out, candidate{w: x, cq: other, v: v, lca: lca})
			}
		}
	}
}

// classify is classifyPreemptionVariant for a candidate in another queue:
// 0 (Never) when it uses no resource that needs preemption or
// reclaimWithinCohort does not allow it; hierarchical reclaim with the
// advantage; otherwise reclaim-without-borrowing when borrowWithinCohort
// is Never or the candidate is at or above the preemptor's priority or
// above maxPriorityThreshold (isAboveBorrowingThreshold), else
// reclaim-while-borrowing.
func classify(w *Workload, cq *clusterQueue, x *Workload, adv bool, needs frSet) pvariant {
	if !usesNeeded(x, needs) || !satisfiesPolicy(cq.pre.ReclaimWithinCohort, w, x) {
		return 0
	}
	switch {
	case adv:
		return hierarchicalReclaim
	case !borrowWithinCohortEnabled(cq.pre):
		return reclaimWithoutBorrowing
	case x.Value >= w.Value || (cq.threshold != nil && x.Value > *cq.threshold):
		return reclaimWithoutBorrowing
	}
	return reclaimWhileBorrowing
}

// candidateValid is candidateIterator.candidateIsValid: a same-queue
// candidate always is; another queue's is not when the attempt allows
// borrowing and it may only be evicted without, when its queue is within
// its nominal quota, or when a cohort between its queue and the level it
// was found at (lca, excluded) is within its SubtreeQuota, in the
// resources that need preemption — evictions earlier in the attempt may
// have brought them back within.
func candidateValid(c candidate, cq *clusterQueue, borrow bool, needs frSet) bool {
	if c.cq == cq {
		return true
	}
	if borrow && c.v == reclaimWithoutBorrowing {
		return false
	}
	if withinNominal(c.cq, needs) {
		return false
	}
	for node := c.cq.cohort; node != nil && node != c.lca; node = node.parent {
		if node.withinNominal(needs) {
			return false
		}
	}
	return true
}

// TreeOwnQuota is the nominalQuota of fr that the Cohort objects of the
// queue's cohort tree hold of their own (0 without a cohort, or in a tree
// of implicit cohorts).
func (s *Snapshot) TreeOwnQuota(queue string, fr FlavorResource) int64 {
	cq := s.queue(queue)
	if cq.cohort == nil {
		return 0
	}
	var total int64
	var walk func(*cohort)
	walk = func(co *cohort) {
		for _, c := range co.cells {
			if c.fr == fr {
				total += c.quota.Nominal
			}
		}
		for _, ch := range co.children {
			walk(ch)
		}
	}
	walk(cq.cohort.root())
	return total
}

// cohortScope names where queue q shares quota, for messages: "cohort gpu"
// for a cohort of ClusterQueues alone, "cohort tree department" when its
// cohort is a Cohort object or has a parent (the tree's root names it).
func (e *explainer) cohortScope(q string) string {
	c := e.p.Queues[q].Cohort
	if _, declared := e.p.Cohorts[c]; !declared && e.p.CohortRoot(c) == c {
		return "cohort " + c
	}
	return "cohort tree " + e.p.CohortTree(q)
}
