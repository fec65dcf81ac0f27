package policy

import (
	"maps"
	"slices"
)

// Cohort is a Kueue v1beta2 Cohort object (schema #Cohort): a node of a
// cohort tree with quota of its own. Its children are the ClusterQueues
// whose Cohort names it and the Cohorts whose Parent names it. Kueue
// (pkg/cache/scheduler/resource_node.go, updateCohortResourceNode) pools
// the cohort's own nominalQuota with what each child lends; with a parent,
// BorrowingLimit bounds what the subtree borrows from the rest of the tree
// and LendingLimit what it lends to it.
type Cohort struct {
	Name string
	// Parent names the parent Cohort; "" for a root.
	Parent string
	// Flavors maps a card (ResourceFlavor) name to the cohort's own
	// quotas; a cohort without quota has none.
	Flavors     map[string]FlavorQuotas
	Description string
}

// FlavorNames returns the cohort's cards, sorted.
func (c Cohort) FlavorNames() []string { return slices.Sorted(maps.Keys(c.Flavors)) }

// CohortNames returns the declared Cohorts' names, sorted.
func (p *Policy) CohortNames() []string { return slices.Sorted(maps.Keys(p.Cohorts)) }

// CohortParent is the parent of a cohort: the declared Cohort's Parent, ""
// for a root or an implicit cohort (a name no Cohort object declares has
// no parent in Kueue: hierarchy.Manager creates it without one).
func (p *Policy) CohortParent(name string) string { return p.Cohorts[name].Parent }

// CohortPath returns a cohort and its ancestors, the cohort first and the
// root last. A cycle of parents (rule cohort-cycle) ends the path before
// the first cohort it would repeat.
func (p *Policy) CohortPath(name string) []string {
	var out []string
	for n := name; n != "" && !slices.Contains(out, n); n = p.CohortParent(n) {
		out = append(out, n)
	}
	return out
}

// CohortRoot is the root of a cohort's tree (the last of CohortPath); ""
// for "". ClusterQueues whose cohorts share a root share quota.
func (p *Policy) CohortRoot(name string) string {
	path := p.CohortPath(name)
	if len(path) == 0 {
		return ""
	}
	return path[len(path)-1]
}

// CohortCycle returns the cohorts on a cycle of parents that the cohort's
// path runs into, in parent order starting at the first repeated one, or
// nil. Kueue admits nothing in a ClusterQueue under a cycle
// (pkg/cache/hierarchy/cycle.go HasCycle; scheduler.Cache.Snapshot marks
// their ClusterQueues inactive).
func (p *Policy) CohortCycle(name string) []string {
	path := p.CohortPath(name)
	if len(path) == 0 {
		return nil
	}
	next := p.CohortParent(path[len(path)-1])
	i := slices.Index(path, next)
	if next == "" || i < 0 {
		return nil
	}
	return path[i:]
}

type wireCohort struct {
	Parent      string                `json:"parent"`
	Flavors     map[string]wireFlavor `json:"flavors"`
	Description string                `json:"description"`
}

// cohortsInto adds the wire policy's Cohorts to p, recording the forms of
// their GPU-memory quotas (form, for rule units-mixed).
func (w *wirePolicy) cohortsInto(p *Policy, form func(g gpuMem, path ...string)) {
	if len(w.Cohorts) == 0 {
		return
	}
	p.Cohorts = map[string]Cohort{}
	for n, c := range w.Cohorts {
		co := Cohort{Name: n, Parent: c.Parent, Description: c.Description, Flavors: map[string]FlavorQuotas{}}
		for fn, f := range c.Flavors {
			co.Flavors[fn] = f.quotas()
			f.forms(form, "cohorts", n, "flavors", fn, "gpuMemory")
		}
		p.Cohorts[n] = co
	}
}

// CohortTree names the cohort tree a ClusterQueue is in: the root of its
// cohort's tree (CohortRoot), "" for a queue without a cohort. The queues
// of one tree share quota and may reclaim from each other; queues of
// different trees never interact.
func (p *Policy) CohortTree(queue string) string { return p.CohortRoot(p.Queues[queue].Cohort) }
