package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// The rules of Cohort objects (schema #Cohort).
var (
	RuleCohortParent = vetRule("cohort-parent",
		"a Cohort's parent is a Cohort the policy declares: Kueue takes an unknown parent for an empty implicit cohort, so a misspelt parent silently cuts the subtree off the quota it means to share")
	RuleCohortCycle = vetRule("cohort-cycle",
		"Cohort parents form a tree: Kueue stops admitting in every ClusterQueue under a cycle of parents until it is removed (pkg/cache/hierarchy/cycle.go HasCycle)")
	RuleLimitWithoutParent = vetRule("limit-without-parent",
		"a Cohort's borrowingLimit and lendingLimit bound what it borrows from and lends to its parent: Kueue's Cohort webhook rejects them on a Cohort without one")
	// RuleCohortUndeclared is a warning (Warnings, not Check): Kueue
	// accepts a cohortName no Cohort object declares and makes it an
	// implicit root cohort (pkg/cache/hierarchy/manager.go
	// UpdateClusterQueueEdge → getOrCreateCohort), so the policy is valid;
	// but in a policy that declares its tree such a name is most often a
	// misspelling.
	RuleCohortUndeclared = finding.Register(finding.Rule{ID: "cohort-undeclared", Verb: finding.Vet, Severity: finding.Warning,
		Reason: "where the policy declares Cohorts, a queue's cohort is one: Kueue takes any other name for an implicit root cohort with no quota, so a misspelt cohort silently cuts the queue off its tree"})
)

// undeclaredCohorts warns (RuleCohortUndeclared) of each queue whose
// cohort names no declared Cohort, when the policy declares any (a policy
// without Cohort objects uses implicit cohorts only, as Kueue v1beta1 did).
func (c *checker) undeclaredCohorts() {
	p := c.p
	if len(p.Cohorts) == 0 {
		return
	}
	declared := p.CohortNames()
	for _, qn := range p.QueueNames() {
		name := p.Queues[qn].Cohort
		if _, ok := p.Cohorts[name]; ok || name == "" {
			continue
		}
		var sharing []string // the queues in the implicit cohort
		for _, o := range p.QueueNames() {
			if p.Queues[o].Cohort == name {
				sharing = append(sharing, o)
			}
		}
		hint := ""
		if best := closest(name, declared); best != "" {
			hint = fmt.Sprintf(": did you mean %s?", best)
		}
		c.add(RuleCohortUndeclared, []string{"queues", qn, "cohort"},
			"queue %s names cohort %q, which the policy does not declare%s (cohorts: %s); Kueue makes it an implicit root cohort, "+
				"with no parent and no quota, shared only by %s. If it is meant, declare it (cohorts: %q: {})",
			qn, name, hint, strings.Join(declared, ", "), strings.Join(sharing, ", "), name)
	}
}

// parentHint is cohort-parent's advice for cohort n's undeclared parent:
// the declared Cohort it is a misspelling of first, when one is close.
func parentHint(p *Policy, n, parent string) string {
	others := slices.DeleteFunc(p.CohortNames(), func(m string) bool { return m == n })
	declare := fmt.Sprintf("declare it, even empty (cohorts: %q: {})", parent)
	if best := closest(parent, others); best != "" {
		return fmt.Sprintf(": did you mean %s? (cohorts: %s); if %q is meant, %s", best, strings.Join(p.CohortNames(), ", "), parent, declare)
	}
	return fmt.Sprintf(" (cohorts: %s); %s", strings.Join(p.CohortNames(), ", "), declare)
}

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
				"cohort %q names parent %q, which the policy does not declare%s", n, co.Parent, parentHint(p, n, co.Parent))
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
			if len(cyc) == 1 {
				c.add(RuleCohortCycle, []string{"cohorts", first, "parent"},
					"cohort %s names itself as its parent; Kueue admits nothing in its ClusterQueues (%s) while it does",
					first, orNone(c.queuesUnder(cyc)))
				continue
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
