package admission

import (
	"fmt"
	"sort"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// FlavorResource is one quota cell: a card (Kueue ResourceFlavor) and a kind
// of resource (shares, host memory, GPU memory). Kueue keys every quota and
// every usage by (flavor, resource); so does the model.
type FlavorResource struct {
	Card string
	Kind policy.Kind
}

func (fr FlavorResource) String() string { return fr.Card + "/" + fr.Kind.String() }

// Workload is one unit Kueue admits: a GPU job (one pod of a step template)
// or a service's pod. Kueue orders workloads by priority, then by creation
// (Seq); among admitted ones, by when their quota was reserved (Admitted).
type Workload struct {
	// Name identifies the workload in reports ("qwen2-5-7b",
	// "gpu-step-no-cache job 3").
	Name string
	// Service is the service's name for a service's pod, "" for a job.
	Service string
	// Template is the step template for a job.
	Template string
	Queue    string
	Card     string
	// Cards lists the cards Kueue may assign the workload, in the order
	// it tries them (policy.CardChoice); nil: its template's
	// (policy.TemplateCards), or Card alone for a service. With more than
	// one, Decide and Fits set Card to the one Kueue's flavor assigner
	// picks (flavors.go).
	Cards []string
	// Priority names the WorkloadPriorityClass; Value is its value.
	Priority string
	Value    int32
	Request  policy.Request

	// Seq is the creation order (Kueue's queue-order timestamp).
	Seq int64
	// Admitted is the order in which quota was reserved (Kueue's
	// QuotaReserved transition time); 0 while pending.
	Admitted int64
}

// requests lists the workload's non-zero requests per FlavorResource, in
// Kinds order. Kueue's workload.Usage only carries the resources a pod
// requests.
func (w *Workload) requests() []frAmount {
	out := make([]frAmount, 0, 3) // len(policy.Kinds), a constant: on the stack once inlined
	for _, k := range policy.Kinds {
		if v := w.Request.Get(k); v > 0 {
			out = append(out, frAmount{FlavorResource{w.Card, k}, v})
		}
	}
	return out
}

type frAmount struct {
	fr FlavorResource
	v  int64
}

// frSet is a small set of FlavorResources (a workload asks at most one
// card's Kinds), in the order added.
type frSet []FlavorResource

func (s frSet) has(fr FlavorResource) bool {
	for _, x := range s {
		if x == fr {
			return true
		}
	}
	return false
}

func (s frSet) add(fr FlavorResource) frSet {
	if s.has(fr) {
		return s
	}
	return append(s, fr)
}

// clusterQueue is Kueue's ClusterQueueSnapshot reduced to what classical
// preemption reads: quotas, usage, the preemption policy and the admitted
// workloads.
type clusterQueue struct {
	name   string
	cohort *cohort
	// cells hold quota and usage per FlavorResource: a queue has a few (its
	// cards × Kinds), so a scan beats a map.
	cells []quotaCell
	pre   policy.Preemption
	// threshold is maxPriorityThreshold resolved to a value (nil: none).
	threshold *int32
	workloads []*Workload
}

// quotaCell is one FlavorResource of a ClusterQueue: its quota (has: the
// queue's resource groups cover the card) and what its admitted workloads
// use; pool is its cohort's cell for the same FlavorResource (nil without
// a cohort).
type quotaCell struct {
	fr    FlavorResource
	has   bool
	quota policy.Quota
	usage int64
	pool  *poolCell
}

// cell returns the queue's cell for fr, nil when it has none.
func (cq *clusterQueue) cell(fr FlavorResource) *quotaCell {
	for i := range cq.cells {
		// The kind first: a queue's cells share their cards.
		if c := &cq.cells[i].fr; c.Kind == fr.Kind && c.Card == fr.Card {
			return &cq.cells[i]
		}
	}
	return nil
}

// cellFor returns the queue's cell for fr, adding one without quota (the
// usage of a card the queue has no quota for).
func (cq *clusterQueue) cellFor(fr FlavorResource) *quotaCell {
	if c := cq.cell(fr); c != nil {
		return c
	}
	c := quotaCell{fr: fr}
	if cq.cohort != nil {
		c.pool = cq.cohort.pool(fr)
	}
	cq.cells = append(cq.cells, c)
	return &cq.cells[len(cq.cells)-1]
}

// quota is the queue's quota for fr (zero without one).
func (cq *clusterQueue) quota(fr FlavorResource) policy.Quota {
	if c := cq.cell(fr); c != nil {
		return c.quota
	}
	return policy.Quota{}
}

// hasQuota reports whether the queue's resource groups cover fr.
func (cq *clusterQueue) hasQuota(fr FlavorResource) bool {
	c := cq.cell(fr)
	return c != nil && c.has
}

// used is what the queue's admitted workloads use of fr.
func (cq *clusterQueue) used(fr FlavorResource) int64 {
	if c := cq.cell(fr); c != nil {
		return c.usage
	}
	return 0
}

// Snapshot is Kueue's quota arithmetic over a policy's ClusterQueues, with a
// set of admitted workloads. The zero value is not usable; use NewSnapshot.
type Snapshot struct {
	p       *policy.Policy
	queues  map[string]*clusterQueue
	cohorts map[string]*cohort
	seq     int64
	clock   int64
	// tcards caches Snapshot.cardsOf per template.
	tcards map[string][]string
	// cands is classicalTargets' scratch: its candidate lists, which never
	// leave it, reused by the next call.
	cands struct{ same, hier, prio, all, removed []candidate }
}

// NewSnapshot builds the empty snapshot of a policy's queues: quotas set,
// nothing admitted.
func NewSnapshot(p *policy.Policy) *Snapshot { return newSnapshotOf(p, nil) }

// newSnapshotOf builds the snapshot of the queues in keep (all when nil).
// Cohorts are closed under it only if keep holds whole cohorts.
func newSnapshotOf(p *policy.Policy, keep map[string]bool) *Snapshot {
	s := &Snapshot{p: p, queues: map[string]*clusterQueue{}, cohorts: map[string]*cohort{}}
	var names []string
	if keep != nil {
		names = sortedStrings(keep)
	} else {
		names = p.QueueNames()
	}
	for _, n := range names {
		q, ok := p.Queues[n]
		if !ok {
			continue
		}
		cq := &clusterQueue{
			name:  n,
			cells: make([]quotaCell, 0, len(q.Flavors)*len(policy.Kinds)),
			pre:   q.Preemption,
		}
		for _, card := range q.FlavorNames() {
			fq := q.Flavors[card]
			for _, k := range policy.Kinds {
				cq.cells = append(cq.cells, quotaCell{fr: FlavorResource{card, k}, has: true, quota: fq.Get(k)})
			}
		}
		if th := q.Preemption.MaxPriorityThreshold; th != "" {
			if pr, ok := p.Priorities[th]; ok {
				v := pr.Value
				cq.threshold = &v
			}
		}
		if q.Cohort != "" {
			// The queue's cohort and its ancestors (Cohort objects with
			// quota of their own, or implicit cohorts): cohorts.go.
			co := s.cohortNode(q.Cohort)
			cq.cohort = co
			co.queues = append(co.queues, cq)
			for i := range cq.cells {
				c := &cq.cells[i]
				c.pool = co.pool(c.fr)
			}
		}
		s.queues[n] = cq
	}
	// SubtreeQuota from each root down (updateCohortTreeResources): a
	// ClusterQueue contributes what it does not keep local (nominal -
	// localQuota, i.e. min(nominal, lendingLimit)), a Cohort its own
	// quota plus its children's, less its own localQuota.
	for _, co := range s.cohorts {
		if co.parent == nil {
			co.updateSubtree()
		}
	}
	return s
}

// localQuota is resource_node.go's localQuota for a ClusterQueue: the part
// of its nominal quota it never lends, nominal - lendingLimit (0 without a
// lending limit). Kueue docs: "lendingLimit ... the maximum amount of quota
// that other ClusterQueues in the cohort can borrow"
// (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#lendinglimit).
func localQuota(q policy.Quota) int64 {
	if q.LendingLimit != nil {
		return max(0, q.Nominal-*q.LendingLimit)
	}
	return 0
}

// Policy returns the policy the snapshot models.
func (s *Snapshot) Policy() *policy.Policy { return s.p }

func (s *Snapshot) queue(name string) *clusterQueue {
	cq := s.queues[name]
	if cq == nil {
		panic(fmt.Sprintf("admission: unknown ClusterQueue %q", name))
	}
	return cq
}

// Nominal is the queue's nominalQuota for fr.
func (s *Snapshot) Nominal(queue string, fr FlavorResource) int64 {
	return s.queue(queue).quota(fr).Nominal
}

// Usage is what the queue's admitted workloads use of fr.
func (s *Snapshot) Usage(queue string, fr FlavorResource) int64 {
	return s.queue(queue).used(fr)
}

// Borrowing reports whether the queue uses more than its nominal quota of fr
// (ClusterQueueSnapshot.Borrowing: usage > nominal).
func (s *Snapshot) Borrowing(queue string, fr FlavorResource) bool {
	cq := s.queue(queue)
	return cq.used(fr) > cq.quota(fr).Nominal
}

// Available is how much of fr the queue can still take without preempting
// anything: what is left of its local (never lent) quota, plus what its
// cohort has available (up its tree: poolCell.available), bounded by the
// queue's borrowingLimit. It transcribes resource_node.go's available:
//
//	parentAvailable = available(cohort)
//	if borrowingLimit != nil:
//	    parentAvailable = min(parentAvailable,
//	        (nominal - local) - max(0, usage - local) + borrowingLimit)
//	available = max(0, local - usage) + parentAvailable
//
// A queue without a cohort has nominal - usage. The result is never
// negative (ClusterQueueSnapshot.Available). Kueue docs: a ClusterQueue may
// borrow the cohort's unused quota up to borrowingLimit
// (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#borrowinglimit);
// a lender keeps nominal - lendingLimit for itself (#lendinglimit).
func (s *Snapshot) Available(queue string, fr FlavorResource) int64 {
	return max(0, s.queue(queue).available(fr))
}

func (cq *clusterQueue) available(fr FlavorResource) int64 {
	c := cq.cell(fr)
	if c == nil || !c.has {
		// The queue has no quota for the card: Kueue's flavor assigner
		// never offers it a flavor its resource groups lack.
		return 0
	}
	q := c.quota
	if cq.cohort == nil {
		return q.Nominal - c.usage
	}
	local := localQuota(q)
	parent := c.pool.available()
	if q.BorrowingLimit != nil {
		stored := q.Nominal - local
		usedInParent := max(0, c.usage-local)
		parent = min(parent, stored-usedInParent+*q.BorrowingLimit)
	}
	return max(0, local-c.usage) + parent
}

// PotentialAvailable is the most of fr the queue could ever hold, with
// nothing else admitted (resource_node.go's potentialAvailable): its local
// quota plus its cohort's potentialAvailable (the whole pool of a flat
// cohort; up a tree, each level bounded by its borrowingLimit), bounded by
// nominal + borrowingLimit.
// A request above it is NoFit: Kueue never admits it.
func (s *Snapshot) PotentialAvailable(queue string, fr FlavorResource) int64 {
	return s.queue(queue).potentialAvailable(fr)
}

func (cq *clusterQueue) potentialAvailable(fr FlavorResource) int64 {
	c := cq.cell(fr)
	if c == nil || !c.has {
		return 0
	}
	q := c.quota
	if cq.cohort == nil {
		return q.Nominal
	}
	avail := localQuota(q) + c.pool.potentialAvailable()
	if q.BorrowingLimit != nil {
		avail = min(avail, q.Nominal+*q.BorrowingLimit)
	}
	return avail
}

// addUsage is resource_node.go's addUsage: the part of val beyond what is
// left of the queue's local quota is stored in the cohort (and up its
// tree, poolCell.addUsage).
func (cq *clusterQueue) addUsage(fr FlavorResource, val int64) {
	c := cq.cellFor(fr)
	localAvail := max(0, localQuota(c.quota)-c.usage)
	c.usage += val
	if cq.cohort != nil && val > localAvail {
		c.pool.addUsage(val - localAvail)
	}
}

// removeUsage is resource_node.go's removeUsage.
func (cq *clusterQueue) removeUsage(fr FlavorResource, val int64) {
	c := cq.cellFor(fr)
	stored := c.usage - localQuota(c.quota)
	c.usage -= val
	if stored <= 0 || cq.cohort == nil {
		return
	}
	c.pool.removeUsage(min(val, stored))
}

// NewWorkload stamps a workload with the next creation sequence number.
func (s *Snapshot) NewWorkload(w Workload) *Workload {
	s.seq++
	w.Seq = s.seq
	return &w
}

// workloadArena hands out workloads that live for one situation only
// (simulate, tryScenario: everything they admit they remove again, and
// no pointer to one outlives them); reset makes their storage the next
// situation's, which spares the collector a workload per job tried. It
// grows by chunks, so a pointer it gave stays valid until reset.
type workloadArena struct {
	chunks [][]Workload
	n      int
	// added is the situation's list of what it admitted, to remove
	// again: scratch, reused the same way.
	added []*Workload
}

const arenaChunk = 64

func (a *workloadArena) reset() { a.n = 0 }

// new is s.NewWorkload(w) in the arena's storage.
func (a *workloadArena) new(s *Snapshot, w Workload) *Workload {
	c := a.n / arenaChunk
	if c == len(a.chunks) {
		a.chunks = append(a.chunks, make([]Workload, arenaChunk))
	}
	x := &a.chunks[c][a.n%arenaChunk]
	a.n++
	s.seq++
	w.Seq = s.seq
	*x = w
	return x
}

// Fits reports whether w can be admitted now without preemption: every
// request at most Available (the scheduler's Fit mode), on the card Kueue
// assigns it (assignCard).
func (s *Snapshot) Fits(w *Workload) bool {
	s.assignCard(w)
	cq := s.queue(w.Queue)
	for _, r := range w.requests() {
		if r.v > max(0, cq.available(r.fr)) {
			return false
		}
	}
	return true
}

// Add admits w: its requests count as usage of its queue (and, beyond the
// queue's local quota, of its cohort).
func (s *Snapshot) Add(w *Workload) {
	cq := s.queue(w.Queue)
	for _, r := range w.requests() {
		cq.addUsage(r.fr, r.v)
	}
	s.clock++
	w.Admitted = s.clock
	cq.workloads = append(cq.workloads, w)
}

// Remove evicts or finishes w, returning its quota.
func (s *Snapshot) Remove(w *Workload) {
	cq := s.queue(w.Queue)
	for i, x := range cq.workloads {
		if x == w {
			cq.workloads = append(cq.workloads[:i], cq.workloads[i+1:]...)
			for _, r := range w.requests() {
				cq.removeUsage(r.fr, r.v)
			}
			return
		}
	}
}

// restore re-adds a workload removed during a simulation, keeping its
// admission stamp (Snapshot.AddWorkload in Kueue's preemption simulation).
func (s *Snapshot) restore(w *Workload) {
	cq := s.queue(w.Queue)
	for _, r := range w.requests() {
		cq.addUsage(r.fr, r.v)
	}
	cq.workloads = append(cq.workloads, w)
}

// Workloads returns the queue's admitted workloads in admission order.
func (s *Snapshot) Workloads(queue string) []*Workload {
	ws := append([]*Workload(nil), s.queue(queue).workloads...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].Admitted < ws[j].Admitted })
	return ws
}

// CohortQueues returns the names of the queues in the queue's cohort
// tree (every ClusterQueue under its cohort's root, which share quota),
// itself included, sorted; a queue without a cohort is alone.
func (s *Snapshot) CohortQueues(queue string) []string {
	cq := s.queue(queue)
	if cq.cohort == nil {
		return []string{queue}
	}
	qs := cq.cohort.root().treeQueues()
	out := make([]string, 0, len(qs))
	for _, x := range qs {
		out = append(out, x.name)
	}
	return out
}

// CanBorrow reports whether the queue can ever use more than its nominal
// quota of fr: it is in a cohort tree that lends it some of fr (other
// queues' quota, or a Cohort's own), and its borrowingLimit is not 0. A queue that cannot borrow is never "above
// nominal", so reclaimWithinCohort and borrowWithinCohort can never pick
// its workloads (classical.collectCandidatesInSubtree skips ClusterQueues
// within their nominal quota).
func (s *Snapshot) CanBorrow(queue string, fr FlavorResource) bool {
	cq := s.queue(queue)
	if cq.cohort == nil {
		return false
	}
	q := cq.quota(fr)
	if q.BorrowingLimit != nil && *q.BorrowingLimit == 0 {
		return false
	}
	return cq.potentialAvailable(fr) > q.Nominal
}
