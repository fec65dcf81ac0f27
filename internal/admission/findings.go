package admission

import (
	"fmt"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// explainRule registers a rule Explain applies.
func explainRule(id string, sev finding.Severity, also []finding.Severity, reason string) finding.Rule {
	return finding.Register(finding.Rule{ID: id, Verb: finding.Explain, Severity: sev, Also: also, Reason: reason})
}

// The rules Explain applies. IDs are stable: reports, tests and
// suppressions name them. GPU-memory quantities written in two forms are
// vet's rule units-mixed: Explain never sees such a policy.
var (
	// RuleStarvation: a priority gets 0 jobs in a reachable service state
	// and no preemption path admits it. Its time limit does not help: a
	// pod's activeDeadlineSeconds counts from the pod's start
	// (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/),
	// and a pod Kueue holds never starts (plain pods wait behind Kueue's
	// scheduling gate, https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/;
	// Jobs stay suspended, https://kueue.sigs.k8s.io/docs/tasks/run/jobs/). Warning when some state admits it
	// (the wait ends when an on-demand service scales down, which steady
	// requests can postpone indefinitely: the ladder working as designed,
	// but unbounded, so it must be visible); error when no reachable state
	// admits it (it can never run: a policy bug).
	RuleStarvation = explainRule("starvation", finding.Warning, []finding.Severity{finding.Error},
		"a job Kueue holds never starts, so its time limit never counts: it waits as long as what holds the quota stays up")
	// RuleDeadPreemption: a configured preemption Kueue v0.17 can never
	// fire. Error when proved (a reason true in every state, or the search
	// of every reachable state, deadsearch.go): the policy promises
	// behaviour (a waking 7B evicts batch jobs) the cluster will not show.
	// Warning when the search stopped at DeadSearchBudget states without
	// seeing it fire ("not found within N states"): not proved.
	RuleDeadPreemption = explainRule("dead-preemption", finding.Error, []finding.Severity{finding.Warning},
		"a preemption Kueue can never fire is a promise the cluster does not keep (a waking 7B does not evict running batch jobs)")
	// RulePreemptionRejected: borrowWithinCohort without reclaimWithinCohort,
	// which Kueue's ClusterQueue validation rejects. Error.
	RulePreemptionRejected = explainRule("preemption-rejected", finding.Error, nil,
		"Kueue rejects a ClusterQueue with borrowWithinCohort but reclaimWithinCohort Never")
	// RuleLockCapacity: a lock larger than what Kueue admits (warning: the
	// jobs Kueue holds keep lock slots, and whoever queues behind them waits
	// at the lock, where Kueue's priorities do not apply) or smaller (info:
	// quota left idle, usually on purpose).
	RuleLockCapacity = explainRule("lock-capacity", finding.Warning, []finding.Severity{finding.Info},
		"a step holds its lock while Kueue holds its pod: a lock above the quota is held by waiting jobs, one below it leaves quota idle")
	// RuleDeclaredPhysical: the GPU-memory declarations that can be admitted
	// at once on a card against its physical memory. Warning when the
	// quotas admit more than the card has; info otherwise (time-slicing
	// isolates none of it either way).
	RuleDeclaredPhysical = explainRule("declared-physical", finding.Info, []finding.Severity{finding.Warning},
		"declarations are accounting, not limits: time-slicing isolates no memory, so a job that uses more than it declares can run its neighbours out")
	// RuleKueueAlone: a GPU step template (or variant) that takes no Argo
	// lock, so Kueue's quota alone gates it. Info: what that keeps (the
	// admission numbers are the quota's own; no job Kueue would admit waits
	// at a lock behind jobs it holds), what the hand-off gains (the next
	// pod already exists, so no Argo requeue, DEFAULT_REQUEUE_TIME 10 s
	// plus SEMAPHORE_NOTIFY_DELAY 1 s, stands before it) and what is lost
	// (no lock to turn down to one job at a time; exclusivity only from
	// what a job requests).
	RuleKueueAlone = explainRule("kueue-alone", finding.Info, nil,
		"a step without an Argo lock is gated by Kueue's quota alone: the same admission, a hand-off without Argo's 10 s requeue, and no lock to turn down to one job at a time")
	// RuleServiceUnadmitted: a service that is up in some state but that
	// Kueue cannot admit next to the services that run with it. Error.
	RuleServiceUnadmitted = explainRule("service-unadmitted", finding.Error, nil,
		"a service pod Kueue holds never starts: the quota must admit every service that can be up at once")
)

// HasErrors reports whether any finding has error severity.
func (r *Report) HasErrors() bool { return finding.List(r.Findings).HasErrors() }

// Count returns the number of findings of a severity.
func (r *Report) Count(s finding.Severity) int { return finding.List(r.Findings).Count(s) }

func (e *explainer) add(r finding.Rule, severity finding.Severity, path []string, format string, args ...any) {
	f := r.Newf(format, args...)
	f.Severity, f.Path, f.Pos = severity, policy.PathString(path...), e.p.Pos(path...)
	e.findings = append(e.findings, f)
}

func (e *explainer) findingsAll() {
	e.serviceUnadmitted()
	e.starvation()
	e.preemptionRejected()
	e.deadPreemption()
	e.lockCapacity()
	e.kueueAlone()
	e.declaredPhysical()
}

// ---- service-unadmitted

func (e *explainer) serviceUnadmitted() {
	type agg struct {
		short  map[string]bool
		states []string
		never  bool
	}
	bySvc := map[string]*agg{}
	for _, c := range e.comps {
		for _, k := range c.scan {
			st := c.states[k]
			for _, u := range st.unadmitted {
				a := bySvc[u.service]
				if a == nil {
					a = &agg{short: map[string]bool{}}
					bySvc[u.service] = a
				}
				for _, fr := range u.short {
					a.short[e.p.Resource(fr.Kind)] = true
				}
				a.never = a.never || u.outcome == NoFit
				a.states = append(a.states, e.stateWords(c, st.up))
			}
		}
	}
	for _, n := range sortedStrings(keysOf(bySvc)) {
		a := bySvc[n]
		s := e.p.Services[n]
		why := "does not fit next to the services that run with it"
		if a.never {
			why = "asks more than its queue could ever hold"
		}
		e.add(RuleServiceUnadmitted, finding.Error, []string{"services", n},
			"service %s (%s, queue %s) %s: short of %s (it asks %s). Kueue holds its pod, so it never comes up %s",
			n, s.Mode, s.Queue, why, strings.Join(sortedStrings(a.short), ", "), e.requestWords(s.Request),
			strings.Join(dedupe(a.states), ", or "))
	}
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (e *explainer) requestWords(r policy.Request) string {
	var parts []string
	for _, k := range policy.Kinds {
		if v := r.Get(k); v > 0 {
			parts = append(parts, amountWords(k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// amountWords is "1 share", "4,096 MiB host memory", "12,200 MiB GPU memory".
func amountWords(k policy.Kind, v int64) string {
	if k == policy.Shares {
		return policy.FormatAmount(k, v)
	}
	return policy.FormatAmount(k, v) + " " + k.String()
}

// ---- starvation

func (e *explainer) starvation() {
	for vi, v := range e.variants {
		if v.cacheFree {
			continue
		}
		c := e.compOfVariant[vi]
		if !e.othersReachable(c) {
			continue
		}
		names := v.name
		for _, w := range e.variants {
			if w.cacheFree && w.base == v.base {
				names += " and " + w.name
			}
		}
		for _, pr := range e.ladder {
			sets := e.starving[rowID{vi, pr.Name}]
			if len(sets) == 0 {
				continue
			}
			// Always: no reachable state the findings read admits them.
			always, reachable := true, 0
			for _, k := range c.scan {
				st := c.states[k]
				if len(st.unadmitted) > 0 {
					continue
				}
				reachable++
				if r := e.rowAt(c, v, pr, st); !starved(&r) {
					always = false
					break
				}
			}
			e.starvationFinding(c, v, names, pr, sets, always && reachable > 0)
			e.release(c)
		}
	}
}

func (e *explainer) starvationFinding(c *component, v variant, names string, pr policy.Priority, sets [][]int, always bool) {
	st := e.evalState(c, sets[0])
	row := e.rowAt(c, v, pr, st)
	var b strings.Builder
	fmt.Fprintf(&b, "%s jobs (%s, %d) from %s get 0 ", pr.Name, pr.Name, pr.Value, names)
	if always {
		b.WriteString("in every service state")
	} else {
		var ws []string
		for i, s := range sets {
			if i == maxListed {
				ws = append(ws, fmt.Sprintf("while %d more sets of services are up (-o json lists them)", len(sets)-maxListed))
				break
			}
			ws = append(ws, e.stateWords(c, s))
		}
		b.WriteString(strings.Join(ws, ", or "))
	}
	b.WriteString(": ")
	b.WriteString(e.shortWords(e.snapOf(c, st), v, &row))
	b.WriteString(", and ")
	b.WriteString(e.whyNoPreemption(e.snapOf(c, st), v, pr, &row))
	b.WriteString(". ")
	if v.t.TimeLimitSeconds > 0 {
		fmt.Fprintf(&b, "Its time limit (activeDeadlineSeconds %d s) does not count while it waits: a pod Kueue holds never starts. ", v.t.TimeLimitSeconds)
	} else {
		b.WriteString("A time limit would not end the wait either: activeDeadlineSeconds only counts once the pod starts, and a pod Kueue holds never does. ")
	}
	sev := finding.Warning
	if always {
		sev = finding.Error
		b.WriteString("Nothing ends the wait: no service state admits them")
	} else {
		b.WriteString(e.whatEndsTheWait(c, v, pr, sets[0]))
	}
	if !c.exact {
		b.WriteString(" (bounded search: " + e.searchWords(c, v, pr) + ")")
	}
	e.add(RuleStarvation, sev, []string{"priorities", pr.Name}, "%s", b.String())
}

// maxListed bounds the states a finding's message lists.
const maxListed = 6

func (e *explainer) searchWords(c *component, v variant, pr policy.Priority) string {
	for _, o := range e.outlookList {
		if o.Template == v.name && o.Priority == pr.Name {
			return o.Search.Note
		}
	}
	return ""
}

// shortWords says what the next job lacks: "gpu-general has 404 MiB of GPU
// memory (gpupolicy.dev/gpu-memory) left, under one job's 1,024 MiB".
func (e *explainer) shortWords(s *Snapshot, v variant, c *Capacity) string {
	var parts []string
	for _, res := range c.Binding {
		k := e.kindOf(res)
		fr := FlavorResource{v.t.Card, k}
		req := v.t.Request.Get(k)
		if c.BoundBy == "never-fits" {
			parts = append(parts, fmt.Sprintf("one job asks %s (%s), but %s can never hold more than %s",
				amountWords(k, req), res, v.t.Queue, policy.FormatAmount(k, s.PotentialAvailable(v.t.Queue, fr))))
			continue
		}
		avail := s.Available(v.t.Queue, fr)
		if cards := e.cardsOfVariant(v); len(cards) > 1 {
			avail = s.availableSum(v.t.Queue, v.t.Card, s.availableBy(v.t.Queue, cards))[k]
		}
		parts = append(parts, fmt.Sprintf("%s has %s of %s (%s) left, under one job's %s",
			v.t.Queue, policy.FormatAmount(k, avail), k, res, policy.FormatAmount(k, req)))
	}
	if len(parts) == 0 {
		return v.t.Queue + " has no room"
	}
	return strings.Join(parts, "; ")
}

func (e *explainer) kindOf(resource string) policy.Kind {
	for _, k := range policy.Kinds {
		if e.p.Resource(k) == resource {
			return k
		}
	}
	return policy.Shares
}

// whyNoPreemption lists what holds the resources the job lacks and why
// Kueue may not evict it.
func (e *explainer) whyNoPreemption(s *Snapshot, v variant, pr policy.Priority, c *Capacity) string {
	if c.BoundBy == "never-fits" {
		return "no preemption can make room the quota does not have"
	}
	cq := s.queue(v.t.Queue)
	var needs frSet
	cards := e.cardsOfVariant(v)
	for _, res := range c.Binding {
		for _, card := range cards {
			needs = needs.add(FlavorResource{card, e.kindOf(res)})
		}
	}
	for _, fr := range needs {
		if len(cards) == 1 && v.t.Request.Get(fr.Kind) > cq.quota(fr).Nominal && !cq.mayReclaim(fr, v.t.Request.Get(fr.Kind)) && !borrowWithinCohortEnabled(cq.pre) {
			return fmt.Sprintf("Kueue does not even try preemption: one job's %s exceeds %s's own nominal quota (%s) and borrowWithinCohort is Never",
				amountWords(fr.Kind, v.t.Request.Get(fr.Kind)), v.t.Queue, policy.FormatAmount(fr.Kind, cq.quota(fr).Nominal))
		}
	}
	reasons := map[string][]string{}
	var order []string
	note := func(why, who string) {
		if _, ok := reasons[why]; !ok {
			order = append(order, why)
		}
		reasons[why] = append(reasons[why], who)
	}
	for _, qn := range s.CohortQueues(v.t.Queue) {
		other := s.queue(qn)
		for _, w := range s.Workloads(qn) {
			if !usesNeeded(w, needs) {
				continue
			}
			who := fmt.Sprintf("%s (%s, %d)", w.Name, w.Priority, w.Value)
			switch {
			case other == cq && !policyEnabled(cq.pre.WithinClusterQueue):
				note(fmt.Sprintf("withinClusterQueue is Never on %s", cq.name), who)
			case other == cq && !satisfiesPolicy(cq.pre.WithinClusterQueue, &Workload{Value: pr.Value, Seq: 1 << 62}, w):
				note(fmt.Sprintf("at or above %s (%d), which withinClusterQueue %s does not evict", pr.Name, pr.Value, cq.pre.WithinClusterQueue), who)
			case other == cq:
				note("in the same queue, but evicting them would not make it fit", who)
			case !policyEnabled(cq.pre.ReclaimWithinCohort):
				note(fmt.Sprintf("in %s, and reclaimWithinCohort is Never on %s", qn, cq.name), who)
			case withinNominal(other, needs):
				note(fmt.Sprintf("in %s, which is within its nominal quota (Kueue only reclaims from queues above it)", qn), who)
			case !satisfiesPolicy(cq.pre.ReclaimWithinCohort, &Workload{Value: pr.Value, Seq: 1 << 62}, w):
				note(fmt.Sprintf("borrowing in %s, but at or above %s (%d), which reclaimWithinCohort %s does not evict", qn, pr.Name, pr.Value, cq.pre.ReclaimWithinCohort), who)
			default:
				note(fmt.Sprintf("in %s, but evicting them would not make it fit", qn), who)
			}
		}
	}
	if len(order) == 0 {
		return "no preemption admits them: nothing holds what they lack"
	}
	var parts []string
	for _, why := range order {
		parts = append(parts, strings.Join(reasons[why], ", ")+": "+why)
	}
	return "no preemption admits them. What holds that quota: " + strings.Join(parts, "; ")
}

// whatEndsTheWait names the on-demand services of a starving set whose
// scale-down alone admits the job.
func (e *explainer) whatEndsTheWait(c *component, v variant, pr policy.Priority, up []int) string {
	var ends []string
	for k, j := range up {
		rest := append(append([]int{}, up[:k]...), up[k+1:]...)
		r := e.rowAt(c, v, pr, e.evalState(c, rest))
		if r.Reachable && (r.QuotaAdmits > 0 || r.Preemption != nil) {
			n := e.onDemand[c.services[j]]
			s := e.p.Services[n]
			ends = append(ends, fmt.Sprintf("%s scales down, %d s after its last request", n, s.IdleScaleDownSeconds))
		}
	}
	if len(ends) == 0 {
		return fmt.Sprintf("The wait ends only when %s scale down (each an idle period after its last request), so steady requests can hold it off indefinitely", strings.Join(e.names(c, up), " and "))
	}
	return "The wait ends when " + strings.Join(ends, ", or when ") + ", so steady requests can hold it off indefinitely"
}

// ---- preemption-rejected

func (e *explainer) preemptionRejected() {
	for _, n := range e.p.QueueNames() {
		pre := e.p.Queues[n].Preemption
		if borrowWithinCohortEnabled(pre) && !policyEnabled(pre.ReclaimWithinCohort) {
			e.add(RulePreemptionRejected, finding.Error, []string{"queues", n, "preemption"},
				"queue %s sets borrowWithinCohort %s with reclaimWithinCohort Never (the default). Kueue %s's ClusterQueue validation rejects that combination (\"reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never\", apis/kueue/v1beta2/clusterqueue_types.go), so the ClusterQueue is not accepted as written; and its scheduler only looks for victims in other queues through reclaimWithinCohort. Set reclaimWithinCohort (LowerPriority) or drop borrowWithinCohort",
				n, pre.BorrowWithinCohort, KueueVersion)
		}
	}
}

// ---- lock-capacity

func (e *explainer) lockCapacity() {
	for vi, v := range e.variants {
		l, ok := e.smallestLock(v)
		if !ok {
			continue
		}
		comp := e.compOfVariant[vi]
		others := e.othersReachable(comp)
		var over, under []string
		var maxKueue, maxHeld int64
		var maxKueueState string
		overN := 0
		for _, pr := range e.ladder {
			for _, k := range comp.scan {
				st := comp.states[k]
				if !others || len(st.unadmitted) > 0 {
					continue
				}
				c := e.rowAt(comp, v, pr, st)
				if c.Lock == nil {
					continue
				}
				switch c.Lock.Effect {
				case "exceeds":
					if overN < maxListed {
						over = append(over, fmt.Sprintf("%d %s jobs %s", c.Lock.Kueue, pr.Name, e.stateWords(comp, st.up)))
					}
					overN++
					maxHeld = max(maxHeld, c.Lock.Held)
				case "limits":
					under = append(under, pr.Name)
					if c.Lock.Kueue > maxKueue {
						maxKueue, maxKueueState = c.Lock.Kueue, e.stateWords(comp, st.up)
					}
				}
			}
		}
		if overN > maxListed {
			over = append(over, fmt.Sprintf("and %d more service states", overN-maxListed))
		}
		path := []string{"locks", l.Name, "size"}
		if len(over) > 0 {
			e.add(RuleLockCapacity, finding.Warning, path,
				"%s lock (%d) is larger than what %s admits of %s (%s). A step takes the lock before Kueue sees its pod, so %s, and any step behind them, a higher-priority one that could preempt included, waits at the lock, where Kueue's priorities do not apply",
				l.Name, l.Size, v.t.Queue, v.name, strings.Join(over, "; "), holders(maxHeld, l))
		}
		if len(under) > 0 {
			e.add(RuleLockCapacity, finding.Info, path,
				"%s lock (%d) admits fewer %s jobs than %s's quota would (%d %s): %s of quota stays idle for these steps",
				l.Name, l.Size, v.name, v.t.Queue, maxKueue, maxKueueState, jobsWorth(maxKueue-l.Size))
		}
	}
}

// ---- kueue-alone

// kueueAlone describes each template variant that takes no Argo lock:
// Kueue's quota alone gates it. A cache-free variant that shares its
// template's row (same locks) is named with it.
func (e *explainer) kueueAlone() {
	for vi, v := range e.variants {
		if len(v.locks) > 0 {
			continue
		}
		names := []string{v.name}
		path := []string{"templates", v.base, "locks"}
		if v.cacheFree {
			path = []string{"templates", v.base, "cacheFree", "locks"}
		} else if cf := v.t.CacheFree; cf != nil && len(cf.Locks) == 0 {
			names = append(names, cf.Name)
		}
		what := strings.Join(names, " and ")
		takes := "takes"
		if len(names) > 1 {
			takes = "take"
		}
		e.add(RuleKueueAlone, finding.Info, path,
			"%s %s no Argo lock: Kueue's quota alone decides what runs (%s), so the numbers above are %s's quota's own. "+
				"Kept: every admission number; no job Kueue would admit, by preemption included, waits at a lock behind jobs Kueue holds (lock-capacity cannot arise). "+
				"Hand-off: every submitted step's pod exists at once and waits in Kueue, by priority then submission, and Kueue admits the next one within about a second of a job's end, with no Argo requeue (DEFAULT_REQUEUE_TIME, 10 s, then SEMAPHORE_NOTIFY_DELAY, 1 s) before its pod exists. "+
				"Lost: a lock to turn down to one for one job at a time; a job gets the card to itself only by what it requests (shares, declared GPU memory)",
			what, takes, e.mostAtOnce(vi, v), v.t.Queue)
	}
}

// ---- declared-physical

// declaredPhysical compares, per card, the GPU-memory declarations the
// quotas admit at once with the card's physical memory. The most declared
// at the defaults counts, per row, the services on that card and only the
// row's jobs that land on it: a template that may land on several cards
// (anyCard) counts on each card its per-card share (Capacity.Cards), so a
// figure never counts a job on two cards.
func (e *explainer) declaredPhysical() {
	varsOf := map[string][]int{}
	for vi, v := range e.variants {
		for _, card := range e.cardsOfVariant(v) {
			varsOf[card] = append(varsOf[card], vi)
		}
	}
	queuesOf := map[string][]string{}
	for _, qn := range e.p.QueueNames() {
		for card := range e.p.Queues[qn].Flavors {
			queuesOf[card] = append(queuesOf[card], qn)
		}
	}
	for _, card := range e.p.CardNames() {
		cd := e.p.Cards[card]
		var total int64
		var parts []string
		for _, qn := range queuesOf[card] {
			fq := e.p.Queues[qn].Flavors[card]
			total += fq.GPUMemory.Nominal
			parts = append(parts, fmt.Sprintf("%s %s", qn, policy.FormatAmount(policy.GPUMemory, fq.GPUMemory.Nominal)))
		}
		// A Cohort's own nominalQuota admits on top of its queues'.
		for _, cn := range e.p.CohortNames() {
			if fq, ok := e.p.Cohorts[cn].Flavors[card]; ok {
				total += fq.GPUMemory.Nominal
				parts = append(parts, fmt.Sprintf("cohort %s %s", cn, policy.FormatAmount(policy.GPUMemory, fq.GPUMemory.Nominal)))
			}
		}
		if len(parts) == 0 {
			continue
		}
		// The most that services and template defaults declare at once.
		var most int64
		var mostWhere string
		for _, vi := range varsOf[card] {
			comp := e.compOfVariant[vi]
			for _, pr := range e.ladder {
				for _, k := range comp.scan {
					st := comp.states[k]
					c := e.rowAt(comp, e.variants[vi], pr, st)
					if !c.Reachable {
						continue
					}
					declared := st.declared[card]
					n := onCard(c.Admitted, c.Cards, card)
					if c.Preemption != nil && c.Preemption.Admitted > c.Admitted {
						n = onCard(c.Preemption.Admitted, c.Preemption.Cards, card)
						for _, ev := range c.Preemption.Evicts {
							if s, ok := e.p.Services[ev.Service]; ok && s.Card == card {
								declared -= s.Request.GPUMemoryMiB
							}
						}
					}
					declared += n * e.p.Templates[c.BaseTemplate].Request.GPUMemoryMiB
					if declared > most {
						most = declared
						there := ""
						if c.Cards != nil {
							there = " on " + card
						}
						if n == 0 {
							mostWhere = "the services alone, " + e.stateWords(comp, st.up)
						} else {
							mostWhere = fmt.Sprintf("the services and %d %s jobs%s, %s", n, c.Template, there, e.stateWords(comp, st.up))
						}
					}
				}
				e.release(comp)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "GPU-memory declarations admitted at once on %s (%s) can add up to %s (the GPU-memory quotas: %s), against the card's %s physical. ",
			card, cd.Model, amountWords(policy.GPUMemory, total), strings.Join(parts, ", "), policy.FormatAmount(policy.GPUMemory, cd.MemoryMiB))
		sev := finding.Info
		if total > cd.MemoryMiB {
			sev = finding.Warning
			fmt.Fprintf(&b, "The quotas admit %s more than the card holds, so the accounting cannot keep jobs inside it. ",
				policy.FormatAmount(policy.GPUMemory, total-cd.MemoryMiB))
		}
		if most > 0 {
			fmt.Fprintf(&b, "At the services' and templates' default declarations the most is %s (%s). ",
				policy.FormatAmount(policy.GPUMemory, most), mostWhere)
		}
		b.WriteString("A declaration is accounting, not a limit, and time-slicing isolates none of the card's memory: a job that uses more than it declares can run its neighbours, services included, out of memory")
		e.add(RuleDeclaredPhysical, sev, []string{"cards", card, "memoryMiB"}, "%s", b.String())
	}
}

// onCard is how many of a row's n jobs land on card: n for a template
// pinned to it (cards nil), else the card's count in cards.
func onCard(n int64, cards []CardJobs, card string) int64 {
	if cards == nil {
		return n
	}
	for _, c := range cards {
		if c.Card == card {
			return c.Admitted
		}
	}
	return 0
}

func holders(n int64, l policy.Lock) string {
	switch {
	case l.Size == 1:
		return "a job whose pod Kueue holds keeps the " + l.Name + " lock's only slot"
	case n == l.Size:
		return fmt.Sprintf("jobs whose pods Kueue holds can keep all %d of the %s lock's slots", n, l.Name)
	}
	return fmt.Sprintf("jobs whose pods Kueue holds can keep %d of the %s lock's %d slots", n, l.Name, l.Size)
}

func jobsWorth(n int64) string {
	if n == 1 {
		return "one job's worth"
	}
	return fmt.Sprintf("%d jobs' worth", n)
}
