package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// An exclusive step template (schema #Template.exclusive) gets its card to
// itself by quota, not by a lock. SizeExclusive makes it ask every share
// and all the declared GPU memory that the always-on services leave its
// ClusterQueue on its card (Kueue's Available, borrowable quota included:
// resource_node.go available), with its own host memory, at its template's
// priority only (render restricts the step's priority parameter to it).
// Every GPU workload asks at least one share (schema: shares >= 1), so once
// it runs no other workload fits in its queue's shares, nor in what its
// cohort could lend; what the shares cannot exclude (a queue on the card
// outside the cohort, quota a lendingLimit keeps back, a service or job
// that evicts something else to fit) the analysis below finds, and vet
// refuses the template (rule exclusive-alone).

// The rules an exclusive template is held to. vet applies them (through
// render.Check), and render and explain refuse a policy that breaks one.
var (
	RuleExclusiveFits = finding.Register(finding.Rule{ID: "exclusive-fits", Verb: finding.Vet, Severity: finding.Error,
		Reason: "an exclusive step asks every share and all the GPU memory the always-on services leave its queue: Kueue must admit it with only those services running, and one node must hold what it asks"})
	RuleExclusiveAlone = finding.Register(finding.Rule{ID: "exclusive-alone", Verb: finding.Vet, Severity: finding.Error,
		Reason: "an exclusive step has the card to itself only if Kueue admits nothing beside it once it runs: no job, service or other queue's workload on its card, in any service state"})
	RuleExclusiveJobs = finding.Register(finding.Rule{ID: "exclusive-jobs", Verb: finding.Vet, Severity: finding.Error,
		Reason: "an exclusive step does what the policy says about the jobs running when it arrives: Kueue evicts only jobs of a lower priority, and only where the queue's preemption allows it; anything else it waits for"})
)

// Exclusive is what the admission model says about one exclusive step
// template (explain -o json "exclusive"; README, "Exclusive templates").
type Exclusive struct {
	// Template is the WorkflowTemplate; Queue, Card and Priority (and
	// its WorkloadPriorityClass value) are what it runs through and at.
	Template      string `json:"template"`
	Queue         string `json:"queue"`
	Card          string `json:"card"`
	Priority      string `json:"priority"`
	PriorityValue int32  `json:"priorityValue"`
	// Jobs is what the policy says it does about running jobs: "wait" or
	// "evict".
	Jobs string `json:"jobs"`
	// Request is what the step asks, by resource name (Kubernetes
	// quantities): the shares and GPU memory the always-on services leave
	// its queue on its card, and its own host memory.
	Request map[string]string `json:"request"`
	// Alone is true when, in every service state checked, Kueue admits
	// nothing beside it once it runs (every state's Beside is empty).
	Alone bool `json:"alone"`
	// StatesChecked and StatesTotal count the service states (2^on-demand
	// services); all are checked up to MaxOnDemand on-demand services,
	// beyond that every one down, every one up and each one up alone.
	StatesChecked int              `json:"statesChecked"`
	StatesTotal   int64            `json:"statesTotal"`
	States        []ExclusiveState `json:"states"`
	// Words says it in one sentence per state, for text and markdown.
	Words []string `json:"words"`

	// requestWords is Request in the lab's words, in Kinds order.
	requestWords string
}

// ExclusiveState is an exclusive step in one service state.
type ExclusiveState struct {
	// State maps every on-demand service to "up" or "down".
	State map[string]string `json:"state"`
	// Outcome is what Kueue does with the step when only the state's
	// services run: "admit", "preempt" (Evicts first, then admit), "wait"
	// (until Short frees up: WaitsFor) or "no-fit" (never).
	Outcome string `json:"outcome"`
	// Evicts lists the services Kueue evicts to admit it (Outcome
	// "preempt"), in eviction order.
	Evicts []Eviction `json:"evicts"`
	// Short lists the resources it does not fit in (Outcome "wait" or
	// "no-fit"); WaitsFor the workloads holding them that can end: jobs
	// and on-demand services (scale-down), never the always-on services,
	// whose quota the step runs beside.
	Short    []string `json:"short"`
	WaitsFor []string `json:"waitsFor"`
	// Running is, per other step template and priority it may be
	// submitted at, what the step does when as many of those jobs as the
	// queue admits are running as it arrives.
	Running []ExclusiveRunning `json:"running"`
	// Beside lists what Kueue admits while the step runs (empty: nothing,
	// the guarantee); EvictedBy what evicts the step itself to be
	// admitted (a higher priority taking the card back).
	Beside    []Beside `json:"beside"`
	EvictedBy []Beside `json:"evictedBy"`
}

// ExclusiveRunning is what an exclusive step does about Count jobs of
// Template at Priority that run when it arrives: Outcome "evicts" them
// (Evicts, in Kueue's eviction order, may include services) or "waits"
// for them to end.
type ExclusiveRunning struct {
	Template      string     `json:"template"`
	Priority      string     `json:"priority"`
	PriorityValue int32      `json:"priorityValue"`
	Count         int64      `json:"count"`
	Outcome       string     `json:"outcome"`
	Evicts        []Eviction `json:"evicts"`
}

// Beside is a workload Kueue admits while an exclusive step runs, or one
// that evicts the step to be admitted (ExclusiveState.EvictedBy).
type Beside struct {
	// Workload names it: a service, "TEMPLATE job", or "a one-share
	// workload" for any pod submitted through a queue's LocalQueue.
	Workload string `json:"workload"`
	Service  string `json:"service,omitempty"`
	Template string `json:"template,omitempty"`
	Queue    string `json:"queue"`
	Priority string `json:"priority"`
	// Evicts lists what Kueue evicts first to admit it (beside the step:
	// never the step itself).
	Evicts []Eviction `json:"evicts"`
}

// What an exclusive step does about the jobs running when it arrives
// (ExclusiveRunning.Outcome).
const (
	ExclusiveEvicts = "evicts"
	ExclusiveWaits  = "waits"
)

// SizeExclusive returns the policy with every exclusive template's request
// sized (policy.Exclusive.Sized): its shares and GPU memory set to what
// Kueue's Available gives its queue on its card with the always-on
// services admitted (each only if it fits, as Explain admits them) and
// every on-demand service down; host memory stays the template's. It
// returns p itself when no template is exclusive or all are sized, and
// otherwise a copy with a Templates map of its own. The findings (rules
// exclusive-fits, exclusive-alone, exclusive-jobs, at the template's
// exclusive field) say where the sized request fails to give the card to
// the step alone; the policy must have passed policy.Check.
func SizeExclusive(p *policy.Policy) (*policy.Policy, finding.List) {
	p, _, ds := sizeExclusive(p)
	return p, ds
}

// sizeExclusive is SizeExclusive, with the analysis of each template it
// sized and found nothing wrong with, by name: what Exclusives gives for
// it on the sized policy (or on one that differs from it in lock sizes
// only, which the analysis never reads).
func sizeExclusive(p *policy.Policy) (*policy.Policy, map[string]Exclusive, finding.List) {
	var names []string
	for _, n := range p.TemplateNames() {
		if t := p.Templates[n]; t.Exclusive != nil && !t.Exclusive.Sized {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return p, nil, nil
	}
	out := *p
	out.Templates = maps.Clone(p.Templates)
	for _, n := range names {
		t := out.Templates[n]
		if _, ok := p.Queues[t.Queue]; !ok {
			continue
		}
		s, _ := servicesSnapshot(p, nil)
		ex := *t.Exclusive
		ex.Sized = true
		t.Exclusive = &ex
		t.Request.Shares = max(0, s.Available(t.Queue, FlavorResource{t.Card, policy.Shares}))
		t.Request.GPUMemoryMiB = max(0, s.Available(t.Queue, FlavorResource{t.Card, policy.GPUMemory}))
		out.Templates[n] = t
	}
	var ds finding.List
	var analysed map[string]Exclusive
	for _, n := range names {
		// The template's own shares and gpuMemory are the least the step
		// needs.
		own, t := p.Templates[n], out.Templates[n]
		if cards := p.TemplateCards(own); len(cards) > 1 {
			// The request is what one card's quota leaves; Kueue may put
			// the step on another card (flavor assignment), where that
			// request proves nothing.
			f := RuleExclusiveFits.Newf("%s may land on any of %s (Kueue's flavor assignment: %s), but an exclusive step's request is sized from one card's quota, so it proves nothing about the card Kueue picks; pin it to one card (anyCard: false, and a card with nodeLabels)",
				n, strings.Join(cards, ", "), anyCardWhy(p, own))
			f.Path, f.Pos = policy.PathString("templates", n, "exclusive"), p.Pos("templates", n, "exclusive")
			ds = append(ds, f)
			continue
		}
		var need, left []string
		for _, k := range []policy.Kind{policy.Shares, policy.GPUMemory} {
			if own.Request.Get(k) > t.Request.Get(k) {
				need = append(need, amountWords(k, own.Request.Get(k)))
				left = append(left, amountWords(k, t.Request.Get(k)))
			}
		}
		if len(need) > 0 {
			s, _ := servicesSnapshot(p, nil)
			var f finding.Finding
			if on := alwaysOnHolders(s, t); len(on) > 0 {
				f = RuleExclusiveFits.Newf("%s needs at least %s in ClusterQueue %s on %s, but the always-on services holding quota there (%s) leave it %s",
					n, strings.Join(need, " and "), t.Queue, t.Card, strings.Join(on, ", "), strings.Join(left, " and "))
			} else {
				f = RuleExclusiveFits.Newf("%s needs at least %s in ClusterQueue %s on %s, but the queue has only %s there, borrowable quota included",
					n, strings.Join(need, " and "), t.Queue, t.Card, strings.Join(left, " and "))
			}
			f.Path, f.Pos = policy.PathString("templates", n, "exclusive"), p.Pos("templates", n, "exclusive")
			ds = append(ds, f)
			continue
		}
		x, fs := analyzeExclusive(&out, t)
		if len(fs) == 0 {
			if analysed == nil {
				analysed = map[string]Exclusive{}
			}
			analysed[n] = x
		}
		ds = append(ds, fs...)
	}
	ds.SortByPos()
	return &out, analysed, ds
}

// borrowsWhy explains a wait that Kueue's flavor assigner decides before
// any candidate is looked at: fitsResourceQuota
// (pkg/scheduler/flavorassigner) tries preemption only when the request
// itself is within the ClusterQueue's nominalQuota, a reclaim lower in a
// Cohort tree is possible, or borrowWithinCohort is on; a request above
// nominalQuota otherwise waits for free quota. It returns "" when t's
// request is within nominalQuota, its queue preempts while borrowing, or
// its cohort is a Cohort tree (not explained here).
func borrowsWhy(p *policy.Policy, t policy.Template) string {
	q := p.Queues[t.Queue]
	if _, tree := p.Cohorts[q.Cohort]; tree || borrowWithinCohortEnabled(q.Preemption) {
		return ""
	}
	fq := q.Flavors[t.Card]
	for _, k := range policy.Kinds {
		if req, nominal := t.Request.Get(k), fq.Get(k).Nominal; req > nominal {
			return fmt.Sprintf("it asks %s of %s, above ClusterQueue %s's nominalQuota of %s, and Kueue's flavor assigner tries preemption for a request above nominalQuota only with borrowWithinCohort (fitsResourceQuota), so it never evicts them",
				amountWords(k, req), t.Card, t.Queue, amountWords(k, nominal))
		}
	}
	return ""
}

// anyCardWhy says why Kueue chooses t's card: anyCard, or a card without
// nodeLabels in a queue with several cards (policy.TemplateCards).
func anyCardWhy(p *policy.Policy, t policy.Template) string {
	if t.AnyCard {
		return "anyCard: true"
	}
	return "card " + t.Card + " has no nodeLabels to pin it"
}

// Exclusives analyses every exclusive template of a policy sized by
// SizeExclusive (SizeLocks), by template name.
func Exclusives(p *policy.Policy) []Exclusive { return exclusivesKnown(p, nil) }

// exclusivesKnown is Exclusives, taking the analyses sizeExclusive made
// (by template name) instead of running them again.
func exclusivesKnown(p *policy.Policy, known map[string]Exclusive) []Exclusive {
	out := []Exclusive{}
	for _, n := range p.TemplateNames() {
		if t := p.Templates[n]; t.Exclusive != nil {
			x, ok := known[n]
			if !ok {
				x, _ = analyzeExclusive(p, t)
			}
			out = append(out, x)
		}
	}
	return out
}

// servicesSnapshot is the policy's snapshot with its always-on services
// admitted, then the on-demand services in up (in that order), each only
// if Kueue admits it (Explain's fillState); and the services it does not
// admit, in the same order.
func servicesSnapshot(p *policy.Policy, up []string) (*Snapshot, []string) {
	s := NewSnapshot(p)
	var unadmitted []string
	admit := func(name string) {
		sv := p.Services[name]
		if _, ok := s.queues[sv.Queue]; ok {
			w := serviceWorkload(s, p, name)
			if s.Decide(w).Outcome == Admit {
				s.Add(w)
				return
			}
		}
		unadmitted = append(unadmitted, name)
	}
	for _, n := range p.ServiceNames() {
		if p.Services[n].Mode != policy.OnDemand {
			admit(n)
		}
	}
	for _, n := range up {
		admit(n)
	}
	return s, unadmitted
}

// exclusiveStates lists the service states checked, as the up services of
// each: all 2^n up to MaxOnDemand on-demand services, beyond that every
// one down, each one up alone and every one up.
func exclusiveStates(onDemand []string) [][]string {
	n := len(onDemand)
	var out [][]string
	if n <= MaxOnDemand {
		for m := 0; m < 1<<n; m++ {
			var up []string
			for i, s := range onDemand {
				if m&(1<<(n-1-i)) != 0 {
					up = append(up, s)
				}
			}
			out = append(out, up)
		}
		return out
	}
	out = append(out, nil)
	for _, s := range onDemand {
		out = append(out, []string{s})
	}
	return append(out, slices.Clone(onDemand))
}

// exclusiveJob is one job of the exclusive step.
func exclusiveJob(s *Snapshot, p *policy.Policy, t policy.Template) *Workload {
	return s.NewWorkload(Workload{Name: t.Name + " job", Template: t.Name, Queue: t.Queue, Card: t.Card,
		Priority: t.Priority, Value: p.Priorities[t.Priority].Value, Request: t.Request})
}

// analyzeExclusive is the analysis of one sized exclusive template, and
// the findings that say where it fails.
func analyzeExclusive(p *policy.Policy, t policy.Template) (Exclusive, finding.List) {
	x := Exclusive{Template: t.Name, Queue: t.Queue, Card: t.Card, Priority: t.Priority,
		PriorityValue: p.Priorities[t.Priority].Value, Jobs: t.Exclusive.Jobs,
		Request: map[string]string{}, Alone: true, States: []ExclusiveState{}, Words: []string{}, requestWords: requestWords(t)}
	for _, k := range policy.Kinds {
		if v := t.Request.Get(k); v > 0 {
			x.Request[p.Resource(k)] = k.QuantityString(v)
		}
	}
	onDemand := p.OnDemandServices()
	x.StatesTotal = -1
	if len(onDemand) < 63 {
		x.StatesTotal = int64(1) << len(onDemand)
	}
	var ds finding.List
	at := func(f finding.Finding) {
		f.Path, f.Pos = policy.PathString("templates", t.Name, "exclusive"), p.Pos("templates", t.Name, "exclusive")
		ds = append(ds, f)
	}
	if _, ok := p.Queues[t.Queue]; !ok {
		return x, nil
	}
	if t.Request.Shares <= 0 {
		at(RuleExclusiveFits.Newf("%s: the always-on services leave ClusterQueue %s no share of %s; an exclusive step must ask at least one",
			t.Name, t.Queue, t.Card))
		return x, ds
	}
	card := p.Cards[t.Card]
	perNode := max(1, card.CardsPerNode)
	if t.Request.Shares > card.Shares*perNode || t.Request.GPUMemoryMiB > card.MemoryMiB*perNode {
		at(RuleExclusiveFits.Newf("%s asks %s and %s, the quota the always-on services leave ClusterQueue %s on %s, but one node holds %s and %s (%d card(s) of %s): the quota spans more than one node's cards, so the step would never be scheduled; give the card's nodes a queue of their own",
			t.Name, policy.FormatAmount(policy.Shares, t.Request.Shares), policy.FormatAmount(policy.GPUMemory, t.Request.GPUMemoryMiB), t.Queue, t.Card,
			policy.FormatAmount(policy.Shares, card.Shares*perNode), policy.FormatAmount(policy.GPUMemory, card.MemoryMiB*perNode), perNode, t.Card))
		return x, ds
	}
	if t.Request.Shares > 1 && p.DevicePlugin.FailRequestsGreaterThanOne {
		at(RuleExclusiveFits.Newf("%s asks %s, and devicePlugin.failRequestsGreaterThanOne is true: the NVIDIA device plugin refuses a container asking more than one share when the kubelet allocates it (NvidiaDevicePlugin.Allocate), so an exclusive step cannot take the card by its shares; set failRequestsGreaterThanOne to false",
			t.Name, policy.FormatAmount(policy.Shares, t.Request.Shares)))
		return x, ds
	}
	var besideSeen, jobsSeen = map[string]bool{}, map[string]bool{}
	// What each namespace may use, once for every state.
	allowed := p.AllowedEach()
	for _, up := range exclusiveStates(onDemand) {
		st := exclusiveState(p, t, onDemand, up, allowed)
		label := policy.StateLabel(st.State)
		x.States = append(x.States, st)
		x.StatesChecked++
		x.Words = append(x.Words, exclusiveWords(t, p.Queues[t.Queue].Strategy(), label, st))
		if len(up) == 0 && (st.Outcome == Wait.String() || st.Outcome == NoFit.String()) {
			at(RuleExclusiveFits.Newf("%s is never admitted with only the always-on services running (%s): it asks %s, more than ClusterQueue %s has left of %s",
				t.Name, label, requestWords(t), t.Queue, strings.Join(st.Short, ", ")))
		}
		for _, b := range st.Beside {
			key := b.Workload + "@" + b.Priority
			if besideSeen[key] {
				continue
			}
			besideSeen[key] = true
			x.Alone = false
			how := "admitted beside it"
			if len(b.Evicts) > 0 {
				how = "admitted beside it after Kueue evicts " + evictionNames(b.Evicts)
			}
			if b.Service != "" {
				// A service Kueue is not running in this state: say when
				// it would come, not the state it is absent from.
				after := ""
				if len(b.Evicts) > 0 {
					after = ", after evicting " + evictionNames(b.Evicts)
				}
				at(RuleExclusiveAlone.Newf("%s does not get %s to itself: %s, Kueue admits %s beside it at %s priority in ClusterQueue %s%s",
					t.Name, t.Card, serviceArrives(b.Service, t.Name, st.State), b.Service, b.Priority, b.Queue, after))
				continue
			}
			at(RuleExclusiveAlone.Newf("%s does not get %s to itself: with %s, %s at %s priority in ClusterQueue %s is %s",
				t.Name, t.Card, label, b.Workload, b.Priority, b.Queue, how))
		}
		// Where the services alone keep it waiting, it waits for them
		// (WaitsFor), whatever runs beside them.
		alone := st.Outcome == Admit.String() || st.Outcome == Preempt.String()
		for _, r := range st.Running {
			if !alone {
				break
			}
			lower := r.PriorityValue < x.PriorityValue
			var msg string
			switch {
			case t.Exclusive.Jobs == policy.ExclusiveWait && r.Outcome == ExclusiveEvicts && evictsJob(r.Evicts):
				msg = fmt.Sprintf("%s says jobs: \"wait\", but at %s priority it evicts running %s jobs at %s (%s): lower its priority or its queue's preemption",
					t.Name, t.Priority, r.Template, r.Priority, evictionPolicies(r.Evicts))
			case t.Exclusive.Jobs == policy.ExclusiveEvict && lower && r.Outcome == ExclusiveWaits:
				why := borrowsWhy(p, t)
				if why == "" {
					why = fmt.Sprintf("Kueue's preemption (ClusterQueue %s's withinClusterQueue and reclaimWithinCohort) finds no way to make room by evicting them", t.Queue)
				}
				msg = fmt.Sprintf("%s says jobs: \"evict\", but at %s priority it waits for %d running %s job(s) at %s, a lower priority: %s",
					t.Name, t.Priority, r.Count, r.Template, r.Priority, why)
			}
			if msg != "" && !jobsSeen[r.Template+"@"+r.Priority] {
				jobsSeen[r.Template+"@"+r.Priority] = true
				at(RuleExclusiveJobs.New(msg + " (" + label + ")"))
			}
		}
	}
	if t.Exclusive.Jobs == policy.ExclusiveEvict && len(ds) == 0 {
		evicts := false
		for _, st := range x.States {
			for _, r := range st.Running {
				evicts = evicts || r.Outcome == ExclusiveEvicts && evictsJob(r.Evicts)
			}
		}
		if !evicts {
			at(RuleExclusiveJobs.Newf("%s says jobs: \"evict\", but at %s priority it evicts no running job in any service state: no job runs below its priority in ClusterQueue %s's reach; say jobs: \"wait\"",
				t.Name, t.Priority, t.Queue))
		}
	}
	return x, ds
}

// exclusiveState is the step in one service state; allowed is
// p.AllowedEach.
func exclusiveState(p *policy.Policy, t policy.Template, onDemand, up []string, allowed map[string]policy.Rights) ExclusiveState {
	st := ExclusiveState{State: map[string]string{}, Evicts: []Eviction{}, Short: []string{}, WaitsFor: []string{},
		Running: []ExclusiveRunning{}, Beside: []Beside{}, EvictedBy: []Beside{}}
	for _, n := range onDemand {
		st.State[n] = policy.ServiceDown
	}
	for _, n := range up {
		st.State[n] = policy.ServiceUp
	}
	s, _ := servicesSnapshot(p, up)
	xw := exclusiveJob(s, p, t)
	d := s.Decide(xw)
	st.Outcome = d.Outcome.String()
	for _, fr := range d.Short {
		st.Short = append(st.Short, p.Resource(fr.Kind))
	}
	switch d.Outcome {
	case Wait, NoFit:
		st.WaitsFor = exclusiveHolders(s, t, d.Short)
		st.Running = exclusiveRunning(p, t, up, allowed)
		return st
	case Preempt:
		for _, tg := range d.Targets {
			st.Evicts = append(st.Evicts, evictionOf(tg))
			s.Remove(tg.Workload)
		}
		if d := s.Decide(xw); d.Outcome != Admit {
			st.Outcome, st.Evicts, st.Short = Wait.String(), []Eviction{}, []string{}
			for _, fr := range d.Short {
				st.Short = append(st.Short, p.Resource(fr.Kind))
			}
			st.WaitsFor = exclusiveHolders(s, t, d.Short)
			st.Running = exclusiveRunning(p, t, up, allowed)
			return st
		}
	}
	s.Add(xw)
	st.Beside, st.EvictedBy = besideProbes(p, s, t, xw, allowed)
	st.Running = exclusiveRunning(p, t, up, allowed)
	return st
}

// exclusiveHolders lists the admitted workloads, in the step's queue's
// cohort, that hold the resources it is short of and can end: jobs and
// on-demand services (which scale down). The always-on services never
// end; the step was sized to run beside them on their own quota.
func exclusiveHolders(s *Snapshot, t policy.Template, short []FlavorResource) []string {
	out := []string{}
	for _, q := range s.CohortQueues(t.Queue) {
		for _, w := range s.Workloads(q) {
			if w.Service != "" && s.p.Services[w.Service].Mode != policy.OnDemand {
				continue
			}
			for _, fr := range short {
				if w.Card == fr.Card && w.Request.Get(fr.Kind) > 0 && !slices.Contains(out, w.Name) {
					out = append(out, w.Name)
				}
			}
		}
	}
	return out
}

// alwaysOnHolders lists the always-on services admitted in s, in the
// step's queue's cohort, with quota on its card: what the exclusive step
// is sized to run beside.
func alwaysOnHolders(s *Snapshot, t policy.Template) []string {
	var out []string
	for _, q := range s.CohortQueues(t.Queue) {
		for _, w := range s.Workloads(q) {
			if w.Service != "" && w.Card == t.Card && s.p.Services[w.Service].Mode != policy.OnDemand && !slices.Contains(out, w.Service) {
				out = append(out, w.Service)
			}
		}
	}
	slices.Sort(out)
	return out
}

// serviceArrives says when a service Kueue is not running in a state
// would be admitted beside the exclusive step: "if qwen2-5-7b comes up
// while vllm-bench runs" (down in the state, or always-on but not
// admitted), "if qwen2-5-7b, evicted to admit vllm-bench, comes back
// while it runs", with the other on-demand services' state first when
// there are any.
func serviceArrives(name, step string, state map[string]string) string {
	when := "if " + name + " comes up while " + step + " runs"
	if state[name] == policy.ServiceUp {
		when = "if " + name + ", evicted to admit " + step + ", comes back while it runs"
	}
	others := maps.Clone(state)
	delete(others, name)
	if len(others) == 0 {
		return when
	}
	anyUp := false
	for _, v := range others {
		anyUp = anyUp || v == policy.ServiceUp
	}
	if !anyUp {
		return "with the other on-demand services down, " + when
	}
	return "with " + policy.StateLabel(others) + ", " + when
}

// besideProbes tries every other workload the policy could submit while
// the exclusive job xw runs in s: a job of every template at every
// priority its namespace may use, every service Kueue does not run, and a
// one-share workload in every ClusterQueue with quota on the card at
// every priority its namespaces may use (allowed: p.AllowedEach). Each is
// one Decide, undone.
func besideProbes(p *policy.Policy, s *Snapshot, t policy.Template, xw *Workload, allowed map[string]policy.Rights) (beside, evictedBy []Beside) {
	beside, evictedBy = []Beside{}, []Beside{}
	try := func(w *Workload) {
		d := s.Decide(w)
		b := Beside{Workload: w.Name, Service: w.Service, Template: w.Template, Queue: w.Queue, Priority: w.Priority, Evicts: []Eviction{}}
		switch d.Outcome {
		case Admit:
			beside = append(beside, b)
		case Preempt:
			hits := false
			for _, tg := range d.Targets {
				if tg.Workload == xw {
					hits = true
				} else {
					b.Evicts = append(b.Evicts, evictionOf(tg))
				}
			}
			if hits {
				b.Evicts = []Eviction{}
				evictedBy = append(evictedBy, b)
			} else {
				beside = append(beside, b)
			}
		}
	}
	named := map[string]bool{}
	for _, n := range p.TemplateNames() {
		o := p.Templates[n]
		// Only a job that may land on the step's card can run beside it
		// there; one that Kueue may put on several cards is probed on this
		// one (it lands here whenever the cards before it are full).
		if _, ok := s.queues[o.Queue]; !ok || !slices.Contains(p.TemplateCards(o), t.Card) {
			continue
		}
		prios := allowed[o.Namespace].Priorities
		if o.Exclusive != nil {
			prios = []string{o.Priority} // render allows it no other
		}
		for _, pr := range prios {
			w := s.NewWorkload(Workload{Name: n + " job", Template: n, Queue: o.Queue, Card: t.Card, Cards: []string{t.Card},
				Priority: pr, Value: p.Priorities[pr].Value, Request: o.Request})
			before := len(beside)
			try(w)
			if len(beside) > before {
				named[o.Queue] = true
			}
		}
	}
	// Every service Kueue does not run now: the on-demand ones down, and
	// any the step evicted, which come back pending.
	for _, n := range p.ServiceNames() {
		sv := p.Services[n]
		if _, ok := s.queues[sv.Queue]; !ok || sv.Card != t.Card || serviceAdmitted(s, n) {
			continue
		}
		before := len(beside)
		try(serviceWorkload(s, p, n))
		if len(beside) > before {
			named[sv.Queue] = true
		}
	}
	for _, q := range p.QueueNames() {
		if named[q] || !sharesCard(p, q, t.Card) {
			continue
		}
		seen := map[string]bool{}
	namespaces:
		for _, ns := range p.Queues[q].Namespaces {
			for _, pr := range allowed[ns].Priorities {
				if seen[pr] {
					continue
				}
				seen[pr] = true
				w := s.NewWorkload(Workload{Name: "a one-share workload", Queue: q, Card: t.Card,
					Priority: pr, Value: p.Priorities[pr].Value, Request: policy.Request{Shares: 1}})
				before := len(beside)
				try(w)
				if len(beside) > before {
					break namespaces
				}
			}
		}
	}
	return beside, evictedBy
}

// serviceAdmitted reports whether the service's workload is admitted in s.
func serviceAdmitted(s *Snapshot, name string) bool {
	for _, w := range s.Workloads(s.p.Services[name].Queue) {
		if w.Service == name {
			return true
		}
	}
	return false
}

// sharesCard reports whether a ClusterQueue has quota on the card.
func sharesCard(p *policy.Policy, queue, card string) bool {
	_, ok := p.Queues[queue].Flavors[card]
	return ok
}

// exclusiveRunning is, per other template with quota on the step's card
// and per priority its namespace may use (allowed: p.AllowedEach), what
// the step does when as many of those jobs as Kueue admits run as it
// arrives.
func exclusiveRunning(p *policy.Policy, t policy.Template, up []string, allowed map[string]policy.Rights) []ExclusiveRunning {
	out := []ExclusiveRunning{}
	// The state's services, made once: each template and priority's
	// jobs are removed again after (Remove undoes Add; only the order
	// of creation and admission decides, and it stays the same).
	var s *Snapshot
	var added []*Workload
	for _, n := range p.TemplateNames() {
		o := p.Templates[n]
		if n == t.Name || o.Exclusive != nil || !sharesCard(p, o.Queue, t.Card) || !slices.Contains(p.TemplateCards(o), t.Card) {
			continue
		}
		for _, pr := range allowed[o.Namespace].Priorities {
			if s == nil {
				s, _ = servicesSnapshot(p, up)
			}
			if _, ok := s.queues[o.Queue]; !ok {
				continue
			}
			for _, w := range added {
				s.Remove(w)
			}
			added = added[:0]
			for int64(len(added)) < maxJobs {
				// On the step's card: jobs on the queue's other cards
				// neither hold it off nor are evicted for it.
				w := s.NewWorkload(Workload{Name: n + " job", Template: n, Queue: o.Queue, Card: t.Card, Cards: []string{t.Card},
					Priority: pr, Value: p.Priorities[pr].Value, Request: o.Request})
				if s.Decide(w).Outcome != Admit {
					break
				}
				s.Add(w)
				added = append(added, w)
			}
			jobs := int64(len(added))
			if jobs == 0 {
				continue
			}
			r := ExclusiveRunning{Template: n, Priority: pr, PriorityValue: p.Priorities[pr].Value, Count: jobs, Outcome: ExclusiveWaits, Evicts: []Eviction{}}
			if d := s.Decide(exclusiveJob(s, p, t)); d.Outcome == Preempt {
				r.Outcome = ExclusiveEvicts
				for _, tg := range d.Targets {
					r.Evicts = append(r.Evicts, evictionOf(tg))
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// evictionOf is the Eviction of a preemption target.
func evictionOf(t Target) Eviction {
	w := t.Workload
	return Eviction{Workload: w.Name, Service: w.Service, Queue: w.Queue, Priority: w.Priority,
		Reason: t.Reason, Policy: PolicyOf(t.Reason)}
}

// evictsJob reports whether an eviction list holds a job (not a service).
func evictsJob(es []Eviction) bool {
	for _, e := range es {
		if e.Service == "" {
			return true
		}
	}
	return false
}

// evictionNames counts evictions by workload: "4 × gpu-step job, qwen2-5-7b".
func evictionNames(es []Eviction) string {
	var order []string
	count := map[string]int{}
	for _, e := range es {
		if count[e.Workload] == 0 {
			order = append(order, e.Workload)
		}
		count[e.Workload]++
	}
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = n
		if count[n] > 1 {
			parts[i] = fmt.Sprintf("%d × %s", count[n], n)
		}
	}
	return strings.Join(parts, ", ")
}

// evictionPolicies lists the preemption settings behind evictions.
func evictionPolicies(es []Eviction) string {
	var out []string
	for _, e := range es {
		if !slices.Contains(out, e.Policy) {
			out = append(out, e.Policy)
		}
	}
	return strings.Join(out, ", ")
}

// exclusiveWords says what the step does in one state: "vllm-bench with
// qwen2-5-7b up: admitted after Kueue evicts qwen2-5-7b
// (reclaimWithinCohort), and nothing is admitted beside it; running jobs
// it evicts: 4 × gpu-step job at batch; running jobs it waits for: 4 ×
// gpu-step job at training", or "vllm-bench with qwen2-5-7b up: waits
// until qwen2-5-7b scales down (short of ...)".
func exclusiveWords(t policy.Template, strategy, label string, st ExclusiveState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s with %s: ", t.Name, label)
	switch st.Outcome {
	case Admit.String():
		b.WriteString("admitted")
	case Preempt.String():
		fmt.Fprintf(&b, "admitted after Kueue evicts %s (%s)", evictionNames(st.Evicts), evictionPolicies(st.Evicts))
	case NoFit.String():
		fmt.Fprintf(&b, "never admitted (%s above what the queue could hold)", strings.Join(st.Short, ", "))
		return b.String()
	default:
		switch len(st.WaitsFor) {
		case 0:
			fmt.Fprintf(&b, "waits (short of %s, which no job or on-demand service holds)", strings.Join(st.Short, ", "))
		case 1:
			fmt.Fprintf(&b, "waits until %s scales down (short of %s)", st.WaitsFor[0], strings.Join(st.Short, ", "))
		default:
			fmt.Fprintf(&b, "waits until %s scale down (short of %s)", strings.Join(st.WaitsFor, ", "), strings.Join(st.Short, ", "))
		}
		return b.String()
	}
	if len(st.Beside) == 0 {
		b.WriteString(", and nothing is admitted beside it")
	} else {
		var names []string
		for _, x := range st.Beside {
			n := x.Workload + " at " + x.Priority
			if x.Service != "" && st.State[x.Service] == policy.ServiceDown {
				n += " if it comes up"
			}
			names = append(names, n)
		}
		fmt.Fprintf(&b, ", but %s can be admitted beside it", strings.Join(names, ", "))
	}
	if len(st.EvictedBy) > 0 {
		var names []string
		for _, x := range st.EvictedBy {
			names = append(names, x.Workload+" at "+x.Priority+" (ClusterQueue "+x.Queue+")")
		}
		fmt.Fprintf(&b, "; evicted by %s", strings.Join(names, ", "))
	}
	var ev, wait []string
	for _, r := range st.Running {
		item := fmt.Sprintf("%d × %s job at %s", r.Count, r.Template, r.Priority)
		if r.Outcome == ExclusiveEvicts {
			ev = append(ev, item)
		} else {
			wait = append(wait, item)
		}
	}
	if len(ev) > 0 {
		fmt.Fprintf(&b, "; running jobs it evicts: %s", strings.Join(ev, ", "))
	}
	if len(wait) > 0 {
		fmt.Fprintf(&b, "; running jobs it waits for: %s", strings.Join(wait, ", "))
		if strategy == policy.BestEffortFIFO {
			// pkg/cache/queue/cluster_queue.go: a head that does not fit
			// is set aside and the next workload is tried.
			b.WriteString(" (its queue is BestEffortFIFO: while it waits, a job that fits is admitted ahead of it, so a steady stream of them can hold it off)")
		}
	}
	return b.String()
}
