package admission

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The cohort tree as explain shows it: each Kueue Cohort object of the
// policy (cohorts.NAME) with its parent, its own quotas, its child Cohorts
// and the ClusterQueues that name it. The quotas are the Cohort's own
// (Kueue v1beta2 Cohort spec.resourceGroups), not what its subtree holds.

// CohortNode is one Cohort object of the policy.
type CohortNode struct {
	Name string `json:"name"`
	// Parent is the parent Cohort's name; "" for a root.
	Parent string `json:"parent"`
	// Description is the policy's description of it ("" when none).
	Description string `json:"description"`
	// Flavors lists the Cohort's own quotas per card, in the policy's card
	// order; empty for a Cohort without quota.
	Flavors []CohortFlavor `json:"flavors"`
	// Children lists the Cohorts whose parent it is, sorted.
	Children []string `json:"children"`
	// Queues lists the ClusterQueues whose cohort it is, sorted.
	Queues []string `json:"queues"`
}

// CohortFlavor is a Cohort's own quotas on one card (ResourceFlavor).
type CohortFlavor struct {
	Card string `json:"card"`
	// Resources has one entry per resource, in the policy's order
	// (shares, host memory, GPU memory).
	Resources []CohortResource `json:"resources"`
}

// CohortResource is one resource's quota, as Kubernetes quantity strings
// (the GPU-memory resource in Mi, host memory in Mi or Gi, shares as a
// count).
type CohortResource struct {
	// Name is the Kubernetes resource name (policy.Policy.Resource).
	Name         string `json:"name"`
	NominalQuota string `json:"nominalQuota"`
	// BorrowingLimit and LendingLimit are absent (null) when unset: no limit.
	BorrowingLimit *string `json:"borrowingLimit"`
	LendingLimit   *string `json:"lendingLimit"`
}

// CohortTree returns the policy's Cohort objects, sorted by name; empty
// (not nil) for a policy without any.
func CohortTree(p *policy.Policy) []CohortNode {
	out := make([]CohortNode, 0, len(p.Cohorts))
	children := map[string][]string{}
	for _, n := range p.CohortNames() {
		if parent := p.Cohorts[n].Parent; parent != "" {
			children[parent] = append(children[parent], n)
		}
	}
	queues := map[string][]string{}
	for _, qn := range p.QueueNames() {
		if c := p.Queues[qn].Cohort; c != "" {
			queues[c] = append(queues[c], qn)
		}
	}
	for _, n := range p.CohortNames() {
		c := p.Cohorts[n]
		node := CohortNode{Name: n, Parent: c.Parent, Description: c.Description,
			Flavors: []CohortFlavor{}, Children: children[n], Queues: queues[n]}
		if node.Children == nil {
			node.Children = []string{}
		}
		if node.Queues == nil {
			node.Queues = []string{}
		}
		for _, card := range p.CardNames() {
			fq, ok := c.Flavors[card]
			if !ok {
				continue
			}
			cf := CohortFlavor{Card: card, Resources: make([]CohortResource, 0, len(policy.Kinds))}
			for _, k := range policy.Kinds {
				q := fq.Get(k)
				cf.Resources = append(cf.Resources, CohortResource{Name: p.Resource(k),
					NominalQuota: k.QuantityString(q.Nominal), BorrowingLimit: quantityOf(k, q.BorrowingLimit),
					LendingLimit: quantityOf(k, q.LendingLimit)})
			}
			node.Flavors = append(node.Flavors, cf)
		}
		out = append(out, node)
	}
	return out
}

func quantityOf(k policy.Kind, v *int64) *string {
	if v == nil {
		return nil
	}
	s := k.QuantityString(*v)
	return &s
}

// cohortLines is the tree as indented lines, roots first, each child under
// its parent: "department: on rtx-5060-ti 2 shares, 8Gi memory,
// 4096Mi gpu-memory", "  vision: on rtx-5060-ti 0 shares (borrowingLimit
// 2), ...; queues vision-train". A Cohort in a cycle of parents (vet's
// cohort-cycle refuses it) is listed at the top level.
func cohortLines(nodes []CohortNode) []string {
	byName := make(map[string]CohortNode, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var lines []string
	seen := map[string]bool{}
	var walk func(n CohortNode, depth int)
	walk = func(n CohortNode, depth int) {
		if seen[n.Name] {
			return
		}
		seen[n.Name] = true
		lines = append(lines, strings.Repeat("  ", depth)+cohortWords(n))
		for _, c := range n.Children {
			walk(byName[c], depth+1)
		}
	}
	for _, n := range nodes {
		if _, hasParent := byName[n.Parent]; !hasParent {
			walk(n, 0)
		}
	}
	for _, n := range nodes {
		walk(n, 0)
	}
	return lines
}

// cohortWords is one Cohort's line without indentation.
func cohortWords(n CohortNode) string {
	var quotas []string
	for _, f := range n.Flavors {
		var res []string
		for _, r := range f.Resources {
			s := r.NominalQuota + " " + shortRes(r.Name)
			var lim []string
			if r.BorrowingLimit != nil {
				lim = append(lim, "borrowingLimit "+*r.BorrowingLimit)
			}
			if r.LendingLimit != nil {
				lim = append(lim, "lendingLimit "+*r.LendingLimit)
			}
			if len(lim) > 0 {
				s += " (" + strings.Join(lim, ", ") + ")"
			}
			res = append(res, s)
		}
		quotas = append(quotas, "on "+f.Card+" "+strings.Join(res, ", "))
	}
	s := n.Name + ": "
	if len(quotas) == 0 {
		s += "no quota of its own"
	} else {
		s += strings.Join(quotas, "; ")
	}
	if len(n.Queues) > 0 {
		s += "; queues " + strings.Join(n.Queues, ", ")
	}
	return s
}

// writeCohortsText writes the tree, for a policy with Cohort objects.
func (r *Report) writeCohortsText(w io.Writer) {
	if len(r.Cohorts) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCohorts (each Cohort's own quotas; a child under its parent):\n")
	for _, l := range cohortLines(r.Cohorts) {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// writeCohortsMarkdown is writeCohortsText as a nested list.
func (r *Report) writeCohortsMarkdown(w io.Writer) {
	if len(r.Cohorts) == 0 {
		return
	}
	fmt.Fprintf(w, "Cohorts (each Cohort's own quotas; a child under its parent):\n\n")
	for _, l := range cohortLines(r.Cohorts) {
		body := strings.TrimLeft(l, " ")
		fmt.Fprintf(w, "%s- %s\n", l[:len(l)-len(body)], body)
	}
	fmt.Fprintln(w)
}
