package admission

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The dead-preemption rule does not guess from the configuration alone.
// It first tries cheap situations in which Kueue's algorithm (Decide) may
// pick a victim under each configured preemption setting, per cohort (or
// lone queue):
//
//   - every combination of the cohort's on-demand services up or down
//     (all of them up to 8 services; beyond, all down, all up and each alone);
//   - the queues filled, as far as Kueue admits without preemption, with
//     jobs of their step templates at one priority of the ladder (each in
//     turn), either every queue or every queue but the preemptor's, or none;
//   - as preemptor, a job of each of the queue's templates at each priority,
//     and each of the queue's on-demand services that is down (waking).
//
// Every such situation is reachable from a cold start, so a setting seen
// firing there fires. One not seen there is not yet dead: deadPreemption
// then asks for a reason that holds in every state (deadReasons) or runs
// the exhaustive search over every reachable state, evictions included
// (deadsearch.go). The configuration then explains the verdict (Kueue
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
		if c := e.p.CohortTree(n); c != "" { // the root of its cohort tree
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
	masks:
		for _, mask := range e.subMasks(g) {
			for pv := -1; pv < len(e.ladder); pv++ {
				// A preemptor whose every setting has fired has nothing
				// left to find (allFired); once none is left, neither
				// has the group.
				open := e.unfired(preemptors, recs)
				if len(open) == 0 {
					break masks
				}
				// Every queue filled (or none): one snapshot for all
				// preemptors.
				filled := e.tryScenario(s, g, mask, "", pv, open, recs)
				if pv < 0 {
					continue
				}
				// Every queue but the preemptor's filled. Where the
				// preemptor's queue took no job above, that situation is
				// the one just tried: the same workloads admitted in the
				// same order, only creation numbers shifted, and the
				// preemptor the newest either way (Decide reads Seq only
				// against the preemptor's). Its findings are already
				// recorded, the first one wins: skipped. So is it where
				// no other queue of the group has a template: nothing is
				// filled, the situation tried at pv < 0 (a waking
				// service then waits for no running job: no waits).
				for _, r := range open {
					if filled[r] && !e.allFired(r, recs[r]) && e.othersHaveTemplates(g, r) {
						e.tryScenario(s, g, mask, r, pv, []string{r}, recs)
					}
				}
			}
		}
	}
	return recs
}

// othersHaveTemplates reports whether a queue of the group other than r
// has a step template, whose jobs fill it.
func (e *explainer) othersHaveTemplates(g group, r string) bool {
	for _, q := range g.queues {
		if q != r && len(e.templatesBy[q]) > 0 {
			return true
		}
	}
	return false
}

// allFired reports whether every preemption setting queue q enables has
// fired in some situation tried. Its further situations can change
// nothing: deadPreemption reads only which enabled settings fired, and a
// queue's waits only when its borrowWithinCohort did not (deadBorrow).
func (e *explainer) allFired(q string, rec *fireRecord) bool {
	pre := e.p.Queues[q].Preemption
	for _, st := range deadSettings {
		if _, ok := rec.fired[st]; !ok && enabledSetting(pre, st) {
			return false
		}
	}
	return true
}

// unfired lists the preemptors with a setting not yet fired (allFired),
// in order: preemptors itself while that is all of them.
func (e *explainer) unfired(preemptors []string, recs map[string]*fireRecord) []string {
	for i, r := range preemptors {
		if !e.allFired(r, recs[r]) {
			continue
		}
		out := slices.Clone(preemptors[:i])
		for _, r := range preemptors[i+1:] {
			if !e.allFired(r, recs[r]) {
				out = append(out, r)
			}
		}
		return out
	}
	return preemptors
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
	// Every workload made here is removed again when it returns (or,
	// tried, never admitted): they live in the arena.
	e.scenario.reset()
	added := e.scenario.added[:0]
	defer func() {
		for i := len(added) - 1; i >= 0; i-- {
			s.Remove(added[i])
		}
		e.scenario.added = added[:0]
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
				admit(e.scenario.new(s, serviceOf(e.p, n)))
			}
		}
	}
	upNow := map[string]bool{}
	for j, i := range g.onDemand {
		n := e.onDemand[i]
		if mask[j] && admit(e.scenario.new(s, serviceOf(e.p, n))) {
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
				job := Workload{Name: tn + " job", Template: tn, Queue: q, Card: t.Card,
					Priority: pr.Name, Value: pr.Value, Request: t.Request}
				for n < maxJobs && admit(e.scenario.new(s, job)) {
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
			try(e.scenario.new(s, Workload{Name: tn + " job", Template: tn, Queue: r, Card: t.Card,
				Priority: pr.Name, Value: pr.Value, Request: t.Request}))
		}
	}
	for _, i := range g.onDemand {
		n := e.onDemand[i]
		if e.p.Services[n].Queue == r && !upNow[n] {
			try(e.scenario.new(s, serviceOf(e.p, n)))
		}
	}
}

// deadPreemption reports every enabled preemption setting that no
// reachable state fires: first the cold-start scenarios (searchPreemption,
// cheap, and where most settings fire); for a setting they never fire, a
// reason that holds in every state (deadReasons) proves it dead; failing
// one, the exhaustive search over the cohort's reachable states
// (deadsearch.go) decides: fired (no finding), proved dead (error) or cut
// at DeadSearchBudget states (warning, "not found within N states").
func (e *explainer) deadPreemption() {
	recs := e.searchPreemption()
	type open struct {
		q, setting string
		reasons    []string
	}
	var opens []open
	wantBy := map[string]map[string][]string{} // group key → queue → settings to search
	groupOf := map[string]group{}
	for _, g := range e.groups() {
		for _, q := range g.queues {
			groupOf[q] = g
		}
	}
	for _, q := range e.p.QueueNames() {
		rec := recs[q]
		if rec == nil {
			continue
		}
		pre := e.p.Queues[q].Preemption
		for _, st := range deadSettings {
			if !enabledSetting(pre, st) {
				continue
			}
			if _, ok := rec.fired[st]; ok {
				continue
			}
			reasons := e.deadReasons(q, st)
			opens = append(opens, open{q, st, reasons})
			if len(reasons) == 0 {
				k := groupKey(groupOf[q])
				if wantBy[k] == nil {
					wantBy[k] = map[string][]string{}
				}
				wantBy[k][q] = append(wantBy[k][q], st)
			}
		}
	}
	results := map[string]*exhaustiveResult{}
	memo := map[string]*exhaustiveResult{}
	for _, k := range sortedStrings(keysOf(wantBy)) {
		want := wantBy[k]
		var q string
		for q = range want {
			break
		}
		results[k] = e.exhaustiveMemo(groupOf[q], want, memo)
	}
	deadBorrow := map[string]bool{}
	for _, o := range opens {
		if o.setting != "borrowWithinCohort" {
			continue
		}
		v := verdictOf(results[groupKey(groupOf[o.q])], o.q, o.setting, o.reasons)
		if v.fired {
			continue
		}
		e.deadBorrow(o.q, recs[o.q], o.reasons, v)
		deadBorrow[o.q] = true
	}
	for _, o := range opens {
		if o.setting == "borrowWithinCohort" {
			continue
		}
		v := verdictOf(results[groupKey(groupOf[o.q])], o.q, o.setting, o.reasons)
		if v.fired {
			continue
		}
		switch o.setting {
		case "reclaimWithinCohort":
			// With borrowWithinCohort dead too, a dead reclaimWithinCohort
			// is the same path (Kueue requires it for borrowWithinCohort):
			// one finding.
			if !deadBorrow[o.q] {
				e.deadReclaim(o.q, o.reasons, v)
			}
		case "withinClusterQueue":
			e.deadWithin(o.q, o.reasons, v)
		}
	}
}

func groupKey(g group) string { return g.name + "\x00" + strings.Join(g.queues, ",") }

// verdict is how a setting the cold-start scenarios never fired ends.
type verdict struct {
	// fired: the exhaustive search found a state that fires it.
	fired bool
	// proved: a reason that holds in every state, or the exhaustive search
	// run to its end; otherwise the search was cut after states.
	proved bool
	states int
}

func verdictOf(res *exhaustiveResult, q, setting string, reasons []string) verdict {
	if len(reasons) > 0 {
		return verdict{proved: true}
	}
	if res == nil {
		return verdict{}
	}
	if res.fired[q][setting] != nil {
		return verdict{fired: true}
	}
	return verdict{proved: !res.cut, states: res.states}
}

// severity is the finding's severity: error when proved, warning when the
// search was cut.
func (v verdict) severity() finding.Severity {
	if v.proved {
		return finding.Error
	}
	return finding.Warning
}

// searchWords is the verdict of an exhaustive search, as the reason of a
// finding; scope names where the search ran ("queue q" for a queue
// without a cohort, else cohortScope's "cohort gpu").
func (v verdict) searchWords(scope string) string {
	if v.proved {
		return fmt.Sprintf("in none of the %s states Kueue can reach in %s does it pick a victim for it (every mix of admitted workloads the quotas allow, in every admission order, reached through admissions, evictions, finishes and services going up and down)", policy.Thousands(int64(v.states)), scope)
	}
	return fmt.Sprintf("not found within %s states: the search of what Kueue can reach in %s stopped at its bound (%s states) without seeing Kueue pick a victim for it, so it may still fire in a state not searched", policy.Thousands(int64(DeadSearchBudget)), scope, policy.Thousands(int64(DeadSearchBudget)))
}

// deadReasons returns the reasons, each true in every reachable state,
// why a setting of queue q can never fire; nil when there is none (the
// exhaustive search then decides).
func (e *explainer) deadReasons(q, setting string) []string {
	if len(e.templatesIn(q)) == 0 && len(e.servicesIn(q)) == 0 {
		return []string{fmt.Sprintf("nothing runs in %s (no template and no service uses it), so no workload there ever asks Kueue to preempt", q)}
	}
	switch setting {
	case "withinClusterQueue":
		return e.withinReasons(q)
	case "reclaimWithinCohort":
		return e.reclaimReasons(q)
	case "borrowWithinCohort":
		return e.borrowReasons(q)
	}
	return nil
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
		total := s.TreeOwnQuota(q, fr) // the Cohorts' own, in a tree
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
		return fmt.Sprintf("%s owns all of %s's quota (%s), so there is nothing for it to borrow", q, e.cohortScope(q), strings.Join(owns, ", "))
	}
	return fmt.Sprintf("the other queues of %s lend %s nothing it could borrow (its borrowingLimit or their lendingLimit is 0)", e.cohortScope(q), q)
}

// borrowWho lists who in q would borrow and preempt (its services, else
// its jobs), the resources they ask and the highest priority among them.
func (e *explainer) borrowWho(q string) (who []string, frs []FlavorResource, maxPrio int32) {
	maxPrio = -1 << 31
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
		// Every card its jobs may land on (anyCard: flavors.go).
		for _, card := range e.p.TemplateCards(t) {
			addReq(card, t.Request)
		}
		maxPrio = max(maxPrio, e.ladder[0].Value)
	}
	return who, frs, maxPrio
}

// borrowReasons are the reasons borrowWithinCohort of q can never fire,
// each true in every state: no cohort; reclaimWithinCohort Never (Kueue
// collects victims in other queues only through it); no priority that
// runs in the other queues is below the preemptor's and at most the
// threshold; or every queue that runs such a priority is never above its
// nominal quota (kubernetes-sigs/kueue#10171). nil when none holds.
func (e *explainer) borrowReasons(q string) []string {
	cq := e.p.Queues[q]
	pre := cq.Preemption
	if cq.Cohort == "" {
		return []string{q + " has no cohort to borrow from"}
	}
	if !policyEnabled(pre.ReclaimWithinCohort) {
		return []string{fmt.Sprintf("reclaimWithinCohort is Never on %s, and Kueue collects victims in other ClusterQueues only through reclaimWithinCohort (borrowWithinCohort only decides which of them may go while the preemptor borrows); Kueue also rejects this ClusterQueue as written (see preemption-rejected)", q)}
	}
	thr, thrVal := e.threshold(q)
	_, frs, maxPrio := e.borrowWho(q)
	var victimQueues []string
	for _, o := range e.cohortOf[q] {
		if o == q {
			continue
		}
		for v := range e.priorityValuesIn(o) {
			if v < maxPrio && (thrVal == nil || v <= *thrVal) {
				victimQueues = append(victimQueues, o)
				break
			}
		}
	}
	if len(victimQueues) == 0 {
		return []string{fmt.Sprintf("maxPriorityThreshold %s is below every priority that runs in the other queues of %s", thr, e.cohortScope(q))}
	}
	var reasons []string
	for _, o := range victimQueues {
		why := e.neverBorrowsWhy(e.empty, o, frs)
		if why == "" {
			return nil // o may be above nominal: only the search can tell
		}
		reasons = append(reasons, fmt.Sprintf("borrowWithinCohort only evicts workloads in ClusterQueues above their nominal quota (kubernetes-sigs/kueue#10171), and %s is never above it: %s", o, why))
	}
	return reasons
}

// threshold is q's maxPriorityThreshold in words ("batch (10)", or "none")
// and its value (nil: none).
func (e *explainer) threshold(q string) (string, *int32) {
	th := e.p.Queues[q].Preemption.MaxPriorityThreshold
	if th == "" {
		return "none", nil
	}
	v := e.p.Priorities[th].Value
	return fmt.Sprintf("%s (%d)", th, v), &v
}

func (e *explainer) deadBorrow(q string, rec *fireRecord, reasons []string, v verdict) {
	cq := e.p.Queues[q]
	pre := cq.Preemption
	thr, _ := e.threshold(q)
	who, _, _ := e.borrowWho(q)
	reasons, can := e.verdictWords(q, reasons, v)
	can += " it"
	var b strings.Builder
	scope := "cohort (none)"
	if cq.Cohort != "" {
		scope = e.cohortScope(q)
	}
	fmt.Fprintf(&b, "queue %s's borrowWithinCohort (%s, maxPriorityThreshold %s) is meant to let %s, borrowing, evict lower-priority workloads in the other queues of %s. Kueue %s %s: ",
		q, pre.BorrowWithinCohort, thr, orNothing(strings.Join(who, ", "), "its workloads"), scope, KueueVersion, can)
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
	e.add(RuleDeadPreemption, v.severity(), []string{"queues", q, "preemption", "borrowWithinCohort"}, "%s", b.String())
}

func orNothing(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// reclaimReasons are the reasons reclaimWithinCohort of q can never fire,
// each true in every state; nil when none holds.
func (e *explainer) reclaimReasons(q string) []string {
	cq := e.p.Queues[q]
	pre := cq.Preemption
	s := e.empty
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
		return []string{q + " has no cohort: no one borrows from it"}
	case len(lent) == 0:
		return []string{fmt.Sprintf("%s's nominal quota is 0 in every resource: it lends nothing, so there is nothing to reclaim", q)}
	}
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
		return []string{fmt.Sprintf("no other queue of %s can ever borrow what %s lends", e.cohortScope(q), q)}
	}
	if borrowWithinCohortEnabled(pre) {
		return nil
	}
	var over []string
	fitsSomewhere := false
	for _, n := range append(e.templatesIn(q), e.servicesIn(q)...) {
		cards, req := e.cardRequest(n)
		// It fits when it fits the nominal quota of some card it may land
		// on; the words name what exceeds the first card's.
		var asks string
		for _, card := range cards {
			fits := true
			for _, k := range policy.Kinds {
				if req.Get(k) > s.Nominal(q, FlavorResource{card, k}) {
					fits = false
					if asks == "" {
						asks = fmt.Sprintf("%s asks %s", n, amountWords(k, req.Get(k)))
					}
					break
				}
			}
			fitsSomewhere = fitsSomewhere || fits
		}
		if asks != "" {
			over = append(over, asks)
		}
	}
	if !fitsSomewhere && len(over) > 0 {
		return []string{fmt.Sprintf("Kueue reclaims only for a workload that fits its own queue's nominal quota, and none in %s does (%s)", q, strings.Join(over, "; "))}
	}
	if why := e.poolNeverShort(q); why != "" {
		return []string{why}
	}
	return nil
}

// cardRequest is a template's or service's cards and request: a
// service's own card, every card a template's jobs may land on
// (policy.TemplateCards: more than one for anyCard, flavors.go).
func (e *explainer) cardRequest(n string) ([]string, policy.Request) {
	if t, ok := e.p.Templates[n]; ok {
		return e.p.TemplateCards(t), t.Request
	}
	sv := e.p.Services[n]
	return []string{sv.Card}, sv.Request
}

// poolNeverShort proves, when it can, that a workload of q that fits q's
// nominal quota always fits Available, so that Kueue never has to reclaim
// for it (reclaimWithinCohort needs the preemptor within nominal:
// QuantitiesFitInQuota for a hierarchical reclaim, workloadFits without
// borrowing otherwise). With q's usage u and a request r, u + r ≤ nominal,
// Available (resource_node.go's available) is at least
// r + lent_others - pool_others, where lent_others is what the other
// queues lend (nominal - localQuota) and pool_others the most of the
// cohort's pool they can hold (their usage beyond localQuota, bounded by
// their quota and, in a queue that runs no template on the card, by what
// its services ask). So pool_others ≤ lent_others in every resource q's
// workloads ask proves it. Returns "" when it does not hold.
func (e *explainer) poolNeverShort(q string) string {
	s := e.empty
	seen := map[FlavorResource]bool{}
	var parts []string
	for _, n := range append(e.templatesIn(q), e.servicesIn(q)...) {
		cards, req := e.cardRequest(n)
		for _, fr := range cardKinds(cards) {
			k := fr.Kind
			if req.Get(k) <= 0 || seen[fr] {
				continue
			}
			seen[fr] = true
			var lent, held int64
			for _, o := range s.CohortQueues(q) {
				if o == q {
					continue
				}
				oq := s.queue(o).quota(fr)
				local := localQuota(oq)
				lent += oq.Nominal - local
				most := s.PotentialAvailable(o, fr)
				if !e.runsTemplateOn(o, fr) {
					var svc int64
					for _, sn := range e.servicesIn(o) {
						sv := e.p.Services[sn]
						if sv.Card == fr.Card {
							svc += sv.Request.Get(k)
						}
					}
					most = min(most, svc)
				}
				held += max(0, most-local)
			}
			if held > lent {
				return ""
			}
			parts = append(parts, fmt.Sprintf("at most %s of the %s they lend", amountWords(k, held), amountWords(k, lent)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("the other queues of %s can never hold more of the cohort's pool than they lend themselves (%s on %s), so a workload of %s that fits %s's nominal quota always fits without evicting anyone, and Kueue reclaims for no other",
		e.cohortScope(q), strings.Join(parts, ", "), strings.Join(e.p.Queues[q].FlavorNames(), ", "), q, q)
}

// runsTemplateOn reports whether a template of queue o asks fr.
func (e *explainer) runsTemplateOn(o string, fr FlavorResource) bool {
	for _, tn := range e.templatesIn(o) {
		t := e.p.Templates[tn]
		if slices.Contains(e.p.TemplateCards(t), fr.Card) && t.Request.Get(fr.Kind) > 0 {
			return true
		}
	}
	return false
}

// cardKinds is every (card, kind) of cards, card by card.
func cardKinds(cards []string) []FlavorResource {
	out := make([]FlavorResource, 0, len(cards)*len(policy.Kinds))
	for _, card := range cards {
		for _, k := range policy.Kinds {
			out = append(out, FlavorResource{card, k})
		}
	}
	return out
}

func (e *explainer) deadReclaim(q string, reasons []string, v verdict) {
	e.deadSimple(q, "reclaimWithinCohort", e.p.Queues[q].Preemption.ReclaimWithinCohort, "whatever holds the quota", reasons, v)
}

// deadSimple reports a dead withinClusterQueue or reclaimWithinCohort:
// its reasons (the search's verdict when there are none) and that the
// queue's jobs wait for what holds the quota.
func (e *explainer) deadSimple(q, setting, value, holders string, reasons []string, v verdict) {
	reasons, can := e.verdictWords(q, reasons, v)
	e.add(RuleDeadPreemption, v.severity(), []string{"queues", q, "preemption", setting},
		"queue %s's %s (%s) %s in Kueue %s: %s. What happens instead: its jobs wait for %s to finish",
		q, setting, value, can, KueueVersion, strings.Join(reasons, "; and "), holders)
}

// verdictWords returns a finding's reasons (the search's verdict when
// there are none) and its verb: "can never fire" when proved, "was not
// seen firing" when the search was cut.
func (e *explainer) verdictWords(q string, reasons []string, v verdict) ([]string, string) {
	if len(reasons) == 0 {
		scope := "queue " + q
		if e.p.Queues[q].Cohort != "" {
			scope = e.cohortScope(q)
		}
		reasons = []string{v.searchWords(scope)}
	}
	if !v.proved {
		return reasons, "was not seen firing"
	}
	return reasons, "can never fire"
}

// withinReasons are the reasons withinClusterQueue of q can never fire,
// each true in every state; nil when none holds.
func (e *explainer) withinReasons(q string) []string {
	pre := e.p.Queues[q].Preemption
	if len(e.templatesIn(q)) == 0 && len(e.servicesIn(q)) == 1 {
		n := e.servicesIn(q)[0]
		return []string{fmt.Sprintf("only service %s runs in %s, one pod: there is never another workload of %s for it to evict", n, q, q)}
	}
	vals := e.priorityValuesIn(q)
	if len(vals) < 2 && pre.WithinClusterQueue == "LowerPriority" {
		var names []string
		for _, n := range vals {
			names = append(names, n)
		}
		return []string{fmt.Sprintf("only one priority runs in %s (%s), and LowerPriority needs a lower one", q, strings.Join(names, ""))}
	}
	return nil
}

func (e *explainer) deadWithin(q string, reasons []string, v verdict) {
	e.deadSimple(q, "withinClusterQueue", e.p.Queues[q].Preemption.WithinClusterQueue, "the queue's running jobs", reasons, v)
}
