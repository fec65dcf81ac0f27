package drift

import "fmt"

// cohort explains a difference in a Kueue Cohort: its own quota (a pool
// its ClusterQueues and child Cohorts borrow from), the limits between its
// tree and its parent's, and its parent.
func (x *explainer) cohort(d *Difference) string {
	flavor, res, fieldName := quotaField(d)
	parent := orNone(str(x.to[d.Object()].Body, "spec", "parentName"))
	from := func(absent string) string { return x.amount(res, d.from, d.hasFrom, absent) }
	to := func(absent string) string { return x.amount(res, d.to, d.hasTo, absent) }
	if res != "" && flavor != "" {
		switch fieldName {
		case "nominalQuota":
			return fmt.Sprintf("Cohort %s holds %s on %s of its own at %s, %s at %s: a pool on top of its ClusterQueues' quota that every queue under it may borrow.",
				d.Name, from("nothing"), flavor, x.s.From, to("nothing"), x.s.To)
		case "borrowingLimit":
			return fmt.Sprintf("The queues under Cohort %s may borrow %s on %s from the rest of parent %s's tree at %s, %s at %s.",
				d.Name, from("without limit"), flavor, parent, x.s.From, to("without limit"), x.s.To)
		case "lendingLimit":
			return fmt.Sprintf("Cohort %s's tree lends parent %s at most %s of what it leaves unused on %s at %s, %s at %s.",
				d.Name, parent, from("all"), flavor, x.s.From, to("all"), x.s.To)
		}
	}
	if d.Path == "spec.parentName" {
		return fmt.Sprintf("Cohort %s's parent is %s at %s, %s at %s: its queues share quota with that parent's tree, and reclaim from it.",
			d.Name, orNone(d.From), x.s.From, orNone(d.To), x.s.To)
	}
	return ""
}
