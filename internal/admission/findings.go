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
	// fire. Error: the policy promises behaviour (a waking 7B evicts batch
	// jobs) the cluster will not show.
	RuleDeadPreemption = explainRule("dead-preemption", finding.Error, nil,
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
	for _, st := range e.states {
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
			a.states = append(a.states, e.stateWords(st.mask))
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
			"service %s (%s, queue %s) %s: short of %s (it asks %s). Kueue holds its pod, so it never comes up when %s",
			n, s.Mode, s.Queue, why, strings.Join(sortedStrings(a.short), ", "), e.requestWords(s.Request),
			strings.Join(dedupe(a.states), ", or when "))
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

// stateWords describes a state as a clause: "qwen2-5-7b is up", "every
// on-demand service is down", "a and b are up".
func (e *explainer) stateWords(mask uint32) string {
	if len(e.onDemand) == 0 {
		return "the services are up (there are no on-demand ones)"
	}
	up := e.upServices(mask)
	switch {
	case len(up) == 0 && len(e.onDemand) == 1:
		return e.onDemand[0] + " is down"
	case len(up) == 0:
		return "every on-demand service is down"
	case len(up) == 1:
		return up[0] + " is up"
	}
	return strings.Join(up, " and ") + " are up"
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

func (e *explainer) findRow(variant, prio string, mask uint32) *Capacity {
	i, ok := e.rowIndex[rowKey{variant, prio, mask}]
	if !ok {
		return nil
	}
	return &e.rows[i]
}

func (e *explainer) starvation() {
	for _, v := range e.variants {
		if v.cacheFree {
			continue
		}
		names := v.name
		for _, w := range e.variants {
			if w.cacheFree && w.base == v.base {
				names += " and " + w.name
			}
		}
		for _, pr := range e.ladder {
			var starving []*stateSnap
			reachable := 0
			for _, st := range e.states {
				c := e.findRow(v.name, pr.Name, st.mask)
				if !c.Reachable {
					continue
				}
				reachable++
				if c.QuotaAdmits == 0 && c.Preemption == nil {
					starving = append(starving, st)
				}
			}
			if len(starving) == 0 {
				continue
			}
			e.starvationFinding(v, names, pr, starving, len(starving) == reachable)
		}
	}
}

func (e *explainer) starvationFinding(v variant, names string, pr policy.Priority, starving []*stateSnap, always bool) {
	st := starving[0]
	c := e.findRow(v.name, pr.Name, st.mask)
	var b strings.Builder
	fmt.Fprintf(&b, "%s jobs (%s, %d) from %s get 0 ", pr.Name, pr.Name, pr.Value, names)
	if always {
		b.WriteString("in every service state")
	} else {
		var ws []string
		for _, s := range starving {
			ws = append(ws, e.stateWords(s.mask))
		}
		b.WriteString("while " + strings.Join(ws, ", or while "))
	}
	b.WriteString(": ")
	b.WriteString(e.shortWords(st, v, c))
	b.WriteString(", and ")
	b.WriteString(e.whyNoPreemption(st, v, pr, c))
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
		b.WriteString(e.whatEndsTheWait(v, pr, st.mask))
	}
	e.add(RuleStarvation, sev, []string{"priorities", pr.Name}, "%s", b.String())
}

// shortWords says what the next job lacks: "gpu-general has 404 MiB of GPU
// memory (gpupolicy.dev/gpu-memory) left, under one job's 1,024 MiB".
func (e *explainer) shortWords(st *stateSnap, v variant, c *Capacity) string {
	s := st.snap
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
		parts = append(parts, fmt.Sprintf("%s has %s of %s (%s) left, under one job's %s",
			v.t.Queue, policy.FormatAmount(k, s.Available(v.t.Queue, fr)), k, res, policy.FormatAmount(k, req)))
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
func (e *explainer) whyNoPreemption(st *stateSnap, v variant, pr policy.Priority, c *Capacity) string {
	if c.BoundBy == "never-fits" {
		return "no preemption can make room the quota does not have"
	}
	s := st.snap
	cq := s.queue(v.t.Queue)
	needs := map[FlavorResource]bool{}
	for _, res := range c.Binding {
		needs[FlavorResource{v.t.Card, e.kindOf(res)}] = true
	}
	for fr := range needs {
		if v.t.Request.Get(fr.Kind) > cq.quotas[fr].Nominal && !borrowWithinCohortEnabled(cq.pre) {
			return fmt.Sprintf("Kueue does not even try preemption: one job's %s exceeds %s's own nominal quota (%s) and borrowWithinCohort is Never",
				amountWords(fr.Kind, v.t.Request.Get(fr.Kind)), v.t.Queue, policy.FormatAmount(fr.Kind, cq.quotas[fr].Nominal))
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

// whatEndsTheWait names the on-demand services whose scale-down alone
// admits the job.
func (e *explainer) whatEndsTheWait(v variant, pr policy.Priority, mask uint32) string {
	var ends []string
	for i, n := range e.onDemand {
		if !e.up(mask, i) {
			continue
		}
		c := e.findRow(v.name, pr.Name, mask&^e.bit(i))
		if c != nil && c.Reachable && (c.QuotaAdmits > 0 || c.Preemption != nil) {
			s := e.p.Services[n]
			ends = append(ends, fmt.Sprintf("%s scales down, %d s after its last request", n, s.IdleScaleDownSeconds))
		}
	}
	if len(ends) == 0 {
		up := e.upServices(mask)
		return fmt.Sprintf("The wait ends only when %s scale down (each an idle period after its last request), so steady requests can hold it off indefinitely", strings.Join(up, " and "))
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
	for _, v := range e.variants {
		l, ok := e.smallestLock(v)
		if !ok {
			continue
		}
		var over, under []string
		var maxKueue, maxHeld int64
		var maxKueueState string
		for _, pr := range e.ladder {
			for _, st := range e.states {
				c := e.findRow(v.name, pr.Name, st.mask)
				if !c.Reachable || c.Lock == nil {
					continue
				}
				switch c.Lock.Effect {
				case "exceeds":
					over = append(over, fmt.Sprintf("%d %s jobs while %s", c.Lock.Kueue, pr.Name, e.stateWords(st.mask)))
					maxHeld = max(maxHeld, c.Lock.Held)
				case "limits":
					under = append(under, pr.Name)
					if c.Lock.Kueue > maxKueue {
						maxKueue, maxKueueState = c.Lock.Kueue, e.stateWords(st.mask)
					}
				}
			}
		}
		path := []string{"locks", l.Name, "size"}
		if len(over) > 0 {
			e.add(RuleLockCapacity, finding.Warning, path,
				"%s lock (%d) is larger than what %s admits of %s (%s). A step takes the lock before Kueue sees its pod, so %s, and any step behind them, a higher-priority one that could preempt included, waits at the lock, where Kueue's priorities do not apply",
				l.Name, l.Size, v.t.Queue, v.name, strings.Join(over, "; "), holders(maxHeld, l))
		}
		if len(under) > 0 {
			e.add(RuleLockCapacity, finding.Info, path,
				"%s lock (%d) admits fewer %s jobs than %s's quota would (%d while %s): %s of quota stays idle for these steps",
				l.Name, l.Size, v.name, v.t.Queue, maxKueue, maxKueueState, jobsWorth(maxKueue-l.Size))
		}
	}
}

// ---- declared-physical

func (e *explainer) declaredPhysical() {
	rowsOf := map[string][]int{}
	for i, c := range e.rows {
		rowsOf[c.Card] = append(rowsOf[c.Card], i)
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
		if len(parts) == 0 {
			continue
		}
		// The most that services and template defaults declare at once.
		var most int64
		var mostWhere string
		for _, i := range rowsOf[card] {
			c := e.rows[i]
			if !c.Reachable {
				continue
			}
			st := e.states[e.maskIndex(c)]
			var declared int64
			for _, qn := range st.snap.CohortQueues(c.Queue) {
				for _, w := range st.snap.Workloads(qn) {
					if w.Card == card {
						declared += w.Request.GPUMemoryMiB
					}
				}
			}
			n := c.Admitted
			if c.Preemption != nil && c.Preemption.Admitted > n {
				n = c.Preemption.Admitted
				for _, ev := range c.Preemption.Evicts {
					if s, ok := e.p.Services[ev.Service]; ok && s.Card == card {
						declared -= s.Request.GPUMemoryMiB
					}
				}
			}
			declared += n * e.p.Templates[c.BaseTemplate].Request.GPUMemoryMiB
			if declared > most {
				most = declared
				if n == 0 {
					mostWhere = "the services alone, while " + e.stateWords(st.mask)
				} else {
					mostWhere = fmt.Sprintf("the services and %d %s jobs, while %s", n, c.Template, e.stateWords(st.mask))
				}
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

func (e *explainer) maskIndex(c Capacity) int {
	var mask uint32
	for i, n := range e.onDemand {
		if c.State[n] == policy.ServiceUp {
			mask |= e.bit(i)
		}
	}
	return int(mask)
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
