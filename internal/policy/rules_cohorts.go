package policy

import (
	"slices"
	"strings"
)

// The rules of Cohort objects (schema #Cohort).
var (
	RuleCohortParent = vetRule("cohort-parent",
		"a Cohort's parent is a Cohort the policy declares: Kueue takes an unknown parent for an empty implicit cohort, so a misspelt parent silently cuts the subtree off the quota it means to share")
	RuleCohortCycle = vetRule("cohort-cycle",
		"Cohort parents form a tree: Kueue stops admitting in every ClusterQueue under a cycle of parents until it is removed (pkg/cache/hierarchy/cycle.go HasCycle)")
	RuleLimitWithoutParent = vetRule("limit-without-parent",
		"a Cohort's borrowingLimit and lendingLimit bound what it borrows from and lends to its parent: Kueue's Cohort webhook rejects them on a Cohort without one")
)

// cohorts checks the Cohort objects: the cards they hold quota of, their
// parents (declared, no cycle) and the limits a root may not set.
// Kueue's Cohort webhook (pkg/webhooks/cohort_webhook.go validateCohort →
// validateResourceGroups with hasParent = parentName != "") rejects a
// borrowingLimit or lendingLimit without a parent; unlike a ClusterQueue,
// a Cohort may lend more than its own nominalQuota
// (enforceNominalGreaterThanLending is false: it lends its subtree's).
func (c *checker) cohorts() {
	p := c.p
	reported := map[string]bool{}
	for _, n := range p.CohortNames() {
		co := p.Cohorts[n]
		for _, card := range co.FlavorNames() {
			_, ok := p.Cards[card]
			c.ref("card", card, ok, "cohorts", n, "flavors", card)
			if co.Parent != "" {
				continue
			}
			for _, k := range Kinds {
				q := co.Flavors[card].Get(k)
				path := []string{"cohorts", n, "flavors", card, fieldOf(k)}
				if q.BorrowingLimit != nil {
					c.add(RuleLimitWithoutParent, append(path, "borrowingLimit"),
						"cohort %q sets a %s borrowingLimit but has no parent to borrow from (Kueue rejects it)", n, k)
				}
				if q.LendingLimit != nil {
					c.add(RuleLimitWithoutParent, append(path, "lendingLimit"),
						"cohort %q sets a %s lendingLimit but has no parent to lend to (Kueue rejects it)", n, k)
				}
			}
		}
		if co.Parent == "" {
			continue
		}
		if _, ok := p.Cohorts[co.Parent]; !ok {
			c.add(RuleCohortParent, []string{"cohorts", n, "parent"},
				"cohort %q names parent %q, which the policy does not declare (cohorts: %s); declare it, even empty (cohorts: %q: {})",
				n, co.Parent, strings.Join(p.CohortNames(), ", "), co.Parent)
			continue
		}
		if cyc := p.CohortCycle(n); cyc != nil && !reported[cyc[0]] {
			for _, m := range cyc {
				reported[m] = true
			}
			// Reported once, at the cycle's first cohort in name order.
			first := cyc[0]
			for _, m := range cyc {
				first = min(first, m)
			}
			c.add(RuleCohortCycle, []string{"cohorts", first, "parent"},
				"cohorts %s form a cycle of parents (%s → %s); Kueue admits nothing in their ClusterQueues (%s) while it exists",
				strings.Join(slices.Sorted(slices.Values(cyc)), ", "), strings.Join(rotate(cyc, first), " → "), first, orNone(c.queuesUnder(cyc)))
		}
	}
}

// queuesUnder lists the ClusterQueues whose cohort is one of names or
// below one of them, sorted.
func (c *checker) queuesUnder(names []string) []string {
	var out []string
	for _, qn := range c.p.QueueNames() {
		for _, m := range c.p.CohortPath(c.p.Queues[qn].Cohort) {
			if slices.Contains(names, m) {
				out = append(out, qn)
				break
			}
		}
	}
	return out
}

// rotate returns the cycle cyc (in parent order) starting at first.
func rotate(cyc []string, first string) []string {
	for i, m := range cyc {
		if m == first {
			return append(append([]string(nil), cyc[i:]...), cyc[:i]...)
		}
	}
	return cyc
}
