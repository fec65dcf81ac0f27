package admission

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The dead-preemption rule does not guess from the configuration alone: it
// searches for a situation in which Kueue's algorithm (Decide) actually
// picks a victim under each configured preemption setting, and reports the
// settings for which none exists. The situations, per cohort (or lone
// queue):
//
//   - every combination of the cohort's on-demand services up or down
//     (all of them up to 8 services; beyond, all down, all up and each alone);
//   - the queues filled, as far as Kueue admits without preemption, with
//     jobs of their step templates at one priority of the ladder (each in
//     turn), either every queue or every queue but the preemptor's, or none;
//   - as preemptor, a job of each of the queue's templates at each priority,
//     and each of the queue's on-demand services that is down (waking).
//
// Filling a queue to what Kueue admits makes it borrow whatever it can
// borrow, so a queue that could ever be above its nominal quota is above it
// in some situation. The configuration then explains the verdict (Kueue
// issue numbers and rules named in each message).

type group struct {
	name     string
	queues   []string
	onDemand []int // indexes into explainer.onDemand
}

func (e *explainer) groups() []group {
	byCohort := map[string][]string{}
	var lone []string
	for _, n := range e.p.QueueNames() {
		if c := e.p.Queues[n].Cohort; c != "" {
			byCohort[c] = append(byCohort[c], n)
		} else {
			lone = append(lone, n)
		}
	}
	var out []group
	cohorts := make([]string, 0, len(byCohort))
	for c := range byCohort {
		cohorts = append(cohorts, c)
	}
	sort.Strings(cohorts)
	for _, c := range cohorts {
		out = append(out, group{name: c, queues: byCohort[c]})
	}
	for _, q := range lone {
		out = append(out, group{queues: []string{q}})
	}
	for gi := range out {
		in := map[string]bool{}
		for _, q := range out[gi].queues {
			in[q] = true
		}
		for i, n := range e.onDemand {
			if in[e.p.Services[n].Queue] {
				out[gi].onDemand = append(out[gi].onDemand, i)
			}
		}
	}
	return out
}

// fireRecord is what the search found for one queue.
type fireRecord struct {
	// fired maps a preemption setting to a situation in which it fires.
	fired map[string]string
	// waits maps an on-demand service of the queue to a situation in which
	// it wakes, does not fit, and Kueue finds nothing to evict.
	waits map[string]string
}

func (e *explainer) searchPreemption() map[string]*fireRecord {
	recs := map[string]*fireRecord{}
	for _, g := range e.groups() {
		var preemptors []string
		for _, q := range g.queues {
			pre := e.p.Queues[q].Preemption
			if policyEnabled(pre.WithinClusterQueue) || policyEnabled(pre.ReclaimWithinCohort) || borrowWithinCohortEnabled(pre) {
				preemptors = append(preemptors, q)
				recs[q] = &fireRecord{fired: map[string]string{}, waits: map[string]string{}}
			}
		}
		if len(preemptors) == 0 {
			continue
		}
		keep := map[string]bool{}
		for _, q := range g.queues {
			keep[q] = true
		}
		// One snapshot of the group, emptied after each situation.
		s := newSnapshotOf(e.p, keep)
		for _, mask := range e.subMasks(g) {
			for pv := -1; pv < len(e.ladder); pv++ {
				// Every queue filled (or none): one snapshot for all
				// preemptors.
				filled := e.tryScenario(s, g, mask, "", pv, preemptors, recs)
				if pv < 0 {
					continue
				}
				// Every queue but the preemptor's filled. Where the
				// preemptor's queue took no job above, that situation is
				// the one just tried: the same workloads admitted in the
				// same order, only creation numbers shifted, and the
				// preemptor the newest either way (Decide reads Seq only
				// against the preemptor's). Its findings are already
				// recorded, the first one wins: skipped.
				for _, r := range preemptors {
					if filled[r] {
						e.tryScenario(s, g, mask, r, pv, []string{r}, recs)
					}
				}
			}
		}
	}
	return recs
}

// subMasks lists the service states searched for a group: up[j] says
// whether g.onDemand[j] is up.
func (e *explainer) subMasks(g group) [][]bool {
	n := len(g.onDemand)
	var out [][]bool
	if n <= 8 {
		for m := 0; m < 1<<n; m++ {
			up := make([]bool, n)
			for j := range up {
				up[j] = m&(1<<j) != 0
			}
			out = append(out, up)
		}
		return out
	}
	all := make([]bool, n)
	for j := range all {
		all[j] = true
	}
	out = append(out, make([]bool, n), all)
	for j := 0; j < n; j++ {
		one := make([]bool, n)
		one[j] = true
		out = append(out, one)
	}
	return out
}

// tryScenario builds one situation for a group in s, the group's snapshot
// with nothing admitted (services up per mask; the group's queues, except
// skip, filled with jobs at ladder[pv], or nothing filled when pv < 0),
// and tries every preemptor of the given queues. It returns the queues
// that took at least one job, and leaves s with nothing admitted again:
// a snapshot's usage is a function of what it admits (Remove undoes Add),
// and only the order of creation and admission numbers, never their
// values, decides anything.
func (e *explainer) tryScenario(s *Snapshot, g group, mask []bool, skip string, pv int, preemptors []string, recs map[string]*fireRecord) (filledQueues map[string]bool) {
	var added []*Workload
	defer func() {
		for i := len(added) - 1; i >= 0; i-- {
			s.Remove(added[i])
		}
	}()
	admit := func(w *Workload) bool {
		if !s.Fits(w) {
			return false
		}
		s.Add(w)
		added = append(added, w)
		return true
	}
	for _, q := range g.queues {
		for _, n := range e.servicesBy[q] {
			if e.p.Services[n].Mode != policy.OnDemand {
				admit(serviceWorkload(s, e.p, n))
			}
		}
	}
	upNow := map[string]bool{}
	for j, i := range g.onDemand {
		n := e.onDemand[i]
		if mask[j] && admit(serviceWorkload(s, e.p, n)) {
			upNow[n] = true
		}
	}
	fillWords := "nothing else running"
	filledQueues = map[string]bool{}
	if pv >= 0 {
		pr := e.ladder[pv]
		var filled []string
		for _, q := range g.queues {
			if q == skip {
				continue
			}
			for _, tn := range e.templatesBy[q] {
				t := e.p.Templates[tn]
				n := 0
				for n < maxJobs && admit(s.NewWorkload(Workload{Name: tn + " job", Template: tn, Queue: q, Card: t.Card,
					Priority: pr.Name, Value: pr.Value, Request: t.Request})) {
					n++
				}
				if n > 0 {
					filled = append(filled, fmt.Sprintf("%d %s %s jobs running in %s", n, pr.Name, tn, q))
					filledQueues[q] = true
				}
			}
		}
		if len(filled) > 0 {
			fillWords = strings.Join(filled, ", ")
		}
	}
	state := "every on-demand service down"
	if len(upNow) > 0 {
		state = strings.Join(sortedStrings(upNow), " and ") + " up"
	}
	_ = state
	for _, r := range preemptors {
		e.tryPreemptors(s, g, r, pv, upNow, state, fillWords, recs[r])
	}
	return filledQueues
}

func (e *explainer) tryPreemptors(s *Snapshot, g group, r string, pv int, upNow map[string]bool, state, fillWords string, rec *fireRecord) {
	// what names the preemptor, in a recorded situation only.
	what := func(w *Workload) string {
		if w.Service != "" {
			return "a waking " + w.Service
		}
		return fmt.Sprintf("a %s %s job", w.Priority, w.Template)
	}
	try := func(w *Workload) {
		d := s.Decide(w)
		switch d.Outcome {
		case Preempt:
			for _, t := range d.Targets {
				pol := PolicyOf(t.Reason)
				if _, ok := rec.fired[pol]; !ok {
					rec.fired[pol] = fmt.Sprintf("with %s and %s, %s evicts %s (%s)", state, fillWords, what(w), t.Workload.Name, t.Reason)
				}
				if t.Reason == ReasonInCohortReclaimWhileBorrowing {
					// reclaimWithinCohort is what collects the victim.
					if _, ok := rec.fired["reclaimWithinCohort"]; !ok {
						rec.fired["reclaimWithinCohort"] = rec.fired[pol]
					}
				}
			}
		case Wait:
			// A waking service that finds the quota taken by jobs it is
			// configured to evict (priority below it, at most the
			// threshold) and cannot.
			cq := s.queue(r)
			victim := pv >= 0 && e.ladder[pv].Value < w.Value &&
				(cq.threshold == nil || e.ladder[pv].Value <= *cq.threshold) && fillWords != "nothing else running"
			if w.Service != "" && victim {
				if _, ok := rec.waits[w.Service]; !ok {
					rec.waits[w.Service] = "with " + fillWords
					if len(upNow) > 0 {
						rec.waits[w.Service] += " and " + state
					}
				}
			}
		}
	}
	for _, tn := range e.templatesBy[r] {
		t := e.p.Templates[tn]
		for _, pr := range e.ladder {
			try(s.NewWorkload(Workload{Name: tn + " job", Template: tn, Queue: r, Card: t.Card,
				Priority: pr.Name, Value: pr.Value, Request: t.Request}))
		}
	}
	for _, i := range g.onDemand {
		n := e.onDemand[i]
		if e.p.Services[n].Queue == r && !upNow[n] {
			try(serviceWorkload(s, e.p, n))
		}
	}
}

// deadPreemption reports every enabled preemption setting the search never
// saw fire, with the configuration's reasons.
func (e *explainer) deadPreemption() {
	recs := e.searchPreemption()
	for _, q := range e.p.QueueNames() {
		rec := recs[q]
		if rec == nil {
			continue
		}
		pre := e.p.Queues[q].Preemption
		deadBorrow := false
		if borrowWithinCohortEnabled(pre) {
			if _, ok := rec.fired["borrowWithinCohort"]; !ok {
				e.deadBorrow(q, rec)
				deadBorrow = true
			}
		}
		// With borrowWithinCohort dead too, a dead reclaimWithinCohort is
		// the same path (Kueue requires it for borrowWithinCohort): one
		// finding.
		if policyEnabled(pre.ReclaimWithinCohort) && !deadBorrow {
			if _, ok := rec.fired["reclaimWithinCohort"]; !ok {
				e.deadReclaim(q)
			}
		}
		if policyEnabled(pre.WithinClusterQueue) {
			if _, ok := rec.fired["withinClusterQueue"]; !ok {
				e.deadWithin(q)
			}
		}
	}
}

// runsIn describes who runs in a queue: its services and templates.
func (e *explainer) servicesIn(q string) []string { return e.servicesBy[q] }

func (e *explainer) templatesIn(q string) []string { return e.templatesBy[q] }

// priorityValuesIn lists the priority values that can run in a queue:
// its services' priorities, and every rung when templates run in it.
func (e *explainer) priorityValuesIn(q string) map[int32]string {
	out := map[int32]string{}
	for _, n := range e.servicesIn(q) {
		pr := e.p.Services[n].Priority
		out[e.p.Priorities[pr].Value] = pr
	}
	if len(e.templatesIn(q)) > 0 {
		for _, pr := range e.ladder {
			out[pr.Value] = pr.Name
		}
	}
	return out
}

// neverBorrowsWhy explains why queue q can never be above its nominal quota
// in any of the given resources, or returns "" if it can.
func (e *explainer) neverBorrowsWhy(s *Snapshot, q string, frs []FlavorResource) string {
	for _, fr := range frs {
		if s.CanBorrow(q, fr) {
			return ""
		}
	}
	cq := e.p.Queues[q]
	if cq.Cohort == "" {
		return q + " has no cohort"
	}
	var owns []string
	ownsAll := true
	for _, fr := range frs {
		nominal := s.Nominal(q, fr)
		var total int64
		for _, o := range s.CohortQueues(q) {
			total += s.Nominal(o, fr)
		}
		if nominal != total {
			ownsAll = false
		}
		if fr.Kind == policy.Shares {
			owns = append(owns, fmt.Sprintf("%d of %d shares", nominal, total))
		} else {
			owns = append(owns, fmt.Sprintf("%s of %s %s", policy.Thousands(nominal), policy.FormatAmount(fr.Kind, total), fr.Kind))
		}
	}
	if ownsAll {
		return fmt.Sprintf("%s owns all of cohort %s's quota (%s), so there is nothing for it to borrow", q, cq.Cohort, strings.Join(owns, ", "))
	}
	return fmt.Sprintf("the other queues of cohort %s lend %s nothing it could borrow (its borrowingLimit or their lendingLimit is 0)", cq.Cohort, q)
}

func (e *explainer) deadBorrow(q string, rec *fireRecord) {
	cq := e.p.Queues[q]
	pre := cq.Preemption
	s := e.empty
	thr := "none"
	var thrVal *int32
	if th := pre.MaxPriorityThreshold; th != "" {
		v := e.p.Priorities[th].Value
		thrVal = &v
		thr = fmt.Sprintf("%s (%d)", th, v)
	}
	// Who would borrow and preempt: the queue's services, else its jobs.
	var who []string
	var frs []FlavorResource
	var maxPrio int32 = -1 << 31
	seenFR := map[FlavorResource]bool{}
	addReq := func(card string, r policy.Request) {
		for _, k := range policy.Kinds {
			fr := FlavorResource{card, k}
			if r.Get(k) > 0 && !seenFR[fr] {
				seenFR[fr] = true
				frs = append(frs, fr)
			}
		}
	}
	for _, n := range e.servicesIn(q) {
		sv := e.p.Services[n]
		who = append(who, fmt.Sprintf("%s (%s, %d)", n, sv.Priority, e.p.Priorities[sv.Priority].Value))
		addReq(sv.Card, sv.Request)
		maxPrio = max(maxPrio, e.p.Priorities[sv.Priority].Value)
	}
	for _, n := range e.templatesIn(q) {
		t := e.p.Templates[n]
		who = append(who, n+" jobs")
		addReq(t.Card, t.Request)
		maxPrio = max(maxPrio, e.ladder[0].Value)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "queue %s's borrowWithinCohort (%s, maxPriorityThreshold %s) is meant to let %s, borrowing, evict lower-priority workloads in the other queues of cohort %s. Kueue %s can never fire it: ",
		q, pre.BorrowWithinCohort, thr, orNothing(strings.Join(who, ", "), "its workloads"), orNothing(cq.Cohort, "(none)"), KueueVersion)
	var reasons []string
	if cq.Cohort == "" {
		reasons = append(reasons, q+" has no cohort to borrow from")
	}
	if !policyEnabled(pre.ReclaimWithinCohort) {
		reasons = append(reasons, fmt.Sprintf("reclaimWithinCohort is Never on %s, and Kueue collects victims in other ClusterQueues only through reclaimWithinCohort (borrowWithinCohort only decides which of them may go while the preemptor borrows); Kueue also rejects this ClusterQueue as written (see preemption-rejected)", q))
	}
	var victimQueues []string
	for _, o := range e.cohortOf[q] {
		if o == q || cq.Cohort == "" {
			continue
		}
		for v := range e.priorityValuesIn(o) {
			if v < maxPrio && (thrVal == nil || v <= *thrVal) {
				victimQueues = append(victimQueues, o)
				break
			}
		}
	}
	if cq.Cohort != "" && len(victimQueues) == 0 {
		reasons = append(reasons, fmt.Sprintf("maxPriorityThreshold %s is below every priority that runs in the other queues of cohort %s", thr, cq.Cohort))
	}
	for _, o := range victimQueues {
		if why := e.neverBorrowsWhy(s, o, frs); why != "" {
			reasons = append(reasons, fmt.Sprintf("borrowWithinCohort only evicts workloads in ClusterQueues above their nominal quota (kubernetes-sigs/kueue#10171), and %s is never above it: %s", o, why))
		}
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "in no service state and no mix of running jobs the model tried does Kueue pick a victim for it")
	}
	b.WriteString(strings.Join(reasons, "; and "))
	b.WriteString(". What happens instead: ")
	var instead []string
	victims := "running jobs"
	if pre.MaxPriorityThreshold != "" {
		victims = "running " + pre.MaxPriorityThreshold + " jobs"
	}
	for _, n := range e.servicesIn(q) {
		sv := e.p.Services[n]
		if sv.Mode != policy.OnDemand {
			continue
		}
		line := fmt.Sprintf("a waking %s waits, its pod held by Kueue, until enough %s finish to free its request (%s)", n, victims, e.requestWords(sv.Request))
		if w, ok := rec.waits[n]; ok {
			line += " (e.g. " + w + ")"
		}
		instead = append(instead, line)
	}
	if len(instead) == 0 {
		instead = append(instead, fmt.Sprintf("a job in %s that must borrow waits until %s finish", q, victims))
	}
	b.WriteString(strings.Join(instead, "; "))
	e.add(RuleDeadPreemption, finding.Error, []string{"queues", q, "preemption", "borrowWithinCohort"}, "%s", b.String())
}

func orNothing(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func (e *explainer) deadReclaim(q string) {
	cq := e.p.Queues[q]
	pre := cq.Preemption
	s := e.empty
	var reasons []string
	var lent []FlavorResource
	for _, card := range cq.FlavorNames() {
		for _, k := range policy.Kinds {
			fr := FlavorResource{card, k}
			if s.Nominal(q, fr) > 0 {
				lent = append(lent, fr)
			}
		}
	}
	switch {
	case cq.Cohort == "":
		reasons = append(reasons, q+" has no cohort: no one borrows from it")
	case len(lent) == 0:
		reasons = append(reasons, fmt.Sprintf("%s's nominal quota is 0 in every resource: it lends nothing, so there is nothing to reclaim", q))
	default:
		borrowed := false
		for _, o := range s.CohortQueues(q) {
			if o == q {
				continue
			}
			for _, fr := range lent {
				if s.CanBorrow(o, fr) {
					borrowed = true
				}
			}
		}
		if !borrowed {
			reasons = append(reasons, fmt.Sprintf("no other queue of cohort %s can ever borrow what %s lends", cq.Cohort, q))
		}
	}
	var over []string
	fitsSomewhere := false
	for _, n := range append(e.templatesIn(q), e.servicesIn(q)...) {
		card, req := "", policy.Request{}
		if t, ok := e.p.Templates[n]; ok {
			card, req = t.Card, t.Request
		} else {
			sv := e.p.Services[n]
			card, req = sv.Card, sv.Request
		}
		fits := true
		for _, k := range policy.Kinds {
			if req.Get(k) > s.Nominal(q, FlavorResource{card, k}) {
				fits = false
				over = append(over, fmt.Sprintf("%s asks %s", n, amountWords(k, req.Get(k))))
				break
			}
		}
		fitsSomewhere = fitsSomewhere || fits
	}
	if !fitsSomewhere && len(over) > 0 && !borrowWithinCohortEnabled(pre) {
		reasons = append(reasons, fmt.Sprintf("Kueue reclaims only for a workload that fits its own queue's nominal quota, and none in %s does (%s)", q, strings.Join(over, "; ")))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "in no service state and no mix of running jobs the model tried does Kueue pick a victim for it")
	}
	e.add(RuleDeadPreemption, finding.Error, []string{"queues", q, "preemption", "reclaimWithinCohort"},
		"queue %s's reclaimWithinCohort (%s) can never fire in Kueue %s: %s. What happens instead: its jobs wait for whatever holds the quota to finish",
		q, pre.ReclaimWithinCohort, KueueVersion, strings.Join(reasons, "; and "))
}

func (e *explainer) deadWithin(q string) {
	pre := e.p.Queues[q].Preemption
	vals := e.priorityValuesIn(q)
	why := "in no service state and no mix of running jobs the model tried does Kueue pick a victim for it"
	if len(vals) < 2 && pre.WithinClusterQueue == "LowerPriority" {
		var names []string
		for _, n := range vals {
			names = append(names, n)
		}
		why = fmt.Sprintf("only one priority runs in %s (%s), and LowerPriority needs a lower one", q, strings.Join(names, ""))
	}
	e.add(RuleDeadPreemption, finding.Error, []string{"queues", q, "preemption", "withinClusterQueue"},
		"queue %s's withinClusterQueue (%s) can never fire in Kueue %s: %s. What happens instead: its jobs wait for the queue's running jobs to finish",
		q, pre.WithinClusterQueue, KueueVersion, why)
}
