package admission

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// MaxOnDemand bounds the number of on-demand services for which the
// per-state capacity rows can be asked for (States "all": 2^n service
// states).
const MaxOnDemand = 16

// AutoOnDemand is the most on-demand services for which the capacity rows
// are enumerated by default (States "auto").
const AutoOnDemand = 8

// The States options: which per-state capacity rows Explain enumerates.
const (
	// StatesAuto enumerates them up to AutoOnDemand on-demand services.
	StatesAuto = "auto"
	// StatesAll enumerates them up to MaxOnDemand, and refuses more.
	StatesAll = "all"
	// StatesNone never does: the outlooks and findings only.
	StatesNone = "none"
)

// StatesModes lists the States options.
var StatesModes = []string{StatesAuto, StatesAll, StatesNone}

// Options tune Explain.
type Options struct {
	// States is StatesAuto (the default when ""), StatesAll or StatesNone.
	States string
	// searchAll makes every component take the bounded search (tests).
	searchAll bool
}

// maxJobs bounds every admission loop (a template asks ≥ 1 share, so real
// policies stop far earlier).
const maxJobs = 4096

// Report is what Explain finds: the capacity table and the findings. Its
// JSON form is the contract described in the README (explain -o json: the contract).
type Report struct {
	// Policy is the policy's name.
	Policy string `json:"policy"`
	// Model names the admission model: "kueue v0.17 classical preemption".
	Model string `json:"model"`
	// OnDemand lists the on-demand services whose up/down states the
	// capacity rows enumerate, sorted.
	OnDemand []string `json:"onDemand"`
	// States says whether the capacity rows were enumerated.
	States StatesInfo `json:"states"`
	// Summary is the answer per template × priority (Outlook), computed
	// without enumerating service states.
	Summary  []Outlook         `json:"summary"`
	Capacity []Capacity        `json:"capacity"`
	Findings []finding.Finding `json:"findings"`
	// LockSizes says how each lock sized from quota got its size
	// (SizeLocks), by lock name; empty when every lock has a number.
	LockSizes []LockSize `json:"lockSizes"`
	// Queueing is one entry per ClusterQueue: its queueingStrategy and,
	// for StrictFIFO, the heads that hold off what Kueue would otherwise
	// admit (queueing.go).
	Queueing []Queueing `json:"queueing"`
	// Access is, per namespace where GPU workloads run, what the policy's
	// access rules let it use and whose workloads it can evict through
	// each ClusterQueue's preemption (access.go).
	Access []NamespaceAccess `json:"access"`
	// Exclusive is, per exclusive step template, what it asks, waits
	// for and evicts, and whether Kueue admits anything beside it
	// (exclusive.go); its templates have no capacity rows.
	Exclusive []Exclusive `json:"exclusive"`
	// Cohorts is the policy's Kueue Cohort objects, sorted by name: each
	// with its parent, its own quotas, its child Cohorts and its
	// ClusterQueues (cohort_report.go); empty without Cohort objects.
	Cohorts []CohortNode `json:"cohorts"`
	// gateText says what stands in front of Kueue (gateOf the policy),
	// whether or not the capacity rows were enumerated.
	gateText string
}

// Capacity is one row: N jobs of one step template at one priority,
// submitted together in one service state.
type Capacity struct {
	// Template is the WorkflowTemplate's name (a cache-free variant's own
	// name); BaseTemplate the policy's template it comes from.
	Template     string `json:"template"`
	BaseTemplate string `json:"baseTemplate"`
	CacheFree    bool   `json:"cacheFree"`
	Queue        string `json:"queue"`
	Card         string `json:"card"`
	Priority     string `json:"priority"`
	// PriorityValue is the WorkloadPriorityClass value.
	PriorityValue int32 `json:"priorityValue"`
	// State maps every on-demand service to "up" or "down" (always-on
	// services are always up).
	State map[string]string `json:"state"`
	// Reachable is false when a service that is up in this state cannot be
	// admitted itself (see finding service-unadmitted); the row then
	// counts only the services Kueue admits.
	Reachable bool `json:"reachable"`
	// Admitted is how many of the jobs run at once without preempting
	// anything: min(QuotaAdmits, the smallest lock's size).
	Admitted int64 `json:"admitted"`
	// QuotaAdmits is how many Kueue admits at once, locks aside.
	QuotaAdmits int64 `json:"quotaAdmits"`
	// BoundBy says what stops the next job: "quota", "lock" or "never-fits"
	// (a job's request exceeds what the queue could ever hold).
	BoundBy string `json:"boundBy"`
	// Binding lists the resources (Kubernetes names) the next job does not
	// fit in once QuotaAdmits jobs run.
	Binding []string `json:"binding"`
	// Lock is the step's smallest lock and its effect; null without locks.
	Lock *LockEffect `json:"lock"`
	// Margin is what is left of each resource for this queue (Kueue's
	// Available, borrowable quota included) while Admitted jobs run.
	Margin map[string]string `json:"margin"`
	// PerResource is how many jobs each resource alone would admit.
	PerResource map[string]int64 `json:"perResource"`
	// Preemption is how jobs get admitted by evicting others, when that
	// admits more than QuotaAdmits; null when preemption adds nothing.
	Preemption *PreemptionPath `json:"preemption"`
	// Cards says where Kueue puts the Admitted jobs, card by card in the
	// queue's order, for a template that may land on several cards
	// (anyCard, or a card without nodeLabels: flavor assignment,
	// flavors.go); absent otherwise. Margin and PerResource then add up
	// the cards.
	Cards []CardJobs `json:"cards,omitempty"`
}

// CardJobs is how many of a row's jobs Kueue assigns one card (its
// ResourceFlavor), and what is left of the card for the queue.
type CardJobs struct {
	Card string `json:"card"`
	// Admitted is how many of the jobs land on the card.
	Admitted int64 `json:"admitted"`
	// Margin is what is left of each resource of the card for the queue
	// (Kueue's Available) while they run.
	Margin map[string]string `json:"margin"`
	// Borrowing is how many of the card's Admitted jobs Kueue admitted
	// borrowing: some request took the queue above its nominalQuota of
	// the card, on quota its cohort lends (queueing.go borrows: Kueue's
	// Assignment.Borrows). BorrowingFrom is the first of them in the
	// row's submission order (1 = the first job submitted), 0 when none.
	// flavorFungibility's whenCanBorrow shows here: MayStopSearch
	// borrows on an earlier card before trying the next, TryNextFlavor
	// fills the next card within nominalQuota first (flavors.go).
	Borrowing     int64 `json:"borrowing"`
	BorrowingFrom int64 `json:"borrowingFrom"`
}

// LockEffect is what a step's lock (Argo semaphore) does next to the
// queue's quota. Argo acquires a template's semaphore before it creates the
// step's pod and releases it when the step completes
// (https://argo-workflows.readthedocs.io/en/latest/synchronization/), and
// Kueue only sees the pod once it exists; so a step holds its lock while
// Kueue holds its pod, at most min(lock, quota) run, and a lock larger than
// the quota is held by jobs that wait in the queue. Locks are taken in the
// template's order, so the smallest one bounds the step.
type LockEffect struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Effect is "limits" (the lock admits fewer than Kueue would),
	// "matches", or "exceeds" (jobs beyond Kueue's count hold lock slots
	// while Kueue holds their pods).
	Effect string `json:"effect"`
	// Kueue is what Kueue would run at once (QuotaAdmits, or the
	// preemption path's count when there is one).
	Kueue int64 `json:"kueue"`
	// Held is how many lock slots are held by jobs Kueue holds ("exceeds").
	Held int64 `json:"held"`
}

// PreemptionPath is how jobs at this priority get admitted by preemption.
type PreemptionPath struct {
	// Admitted is how many run at once once the evictions are done (lock
	// applied); QuotaAdmits the same before the lock.
	Admitted    int64 `json:"admitted"`
	QuotaAdmits int64 `json:"quotaAdmits"`
	// Evicts lists what Kueue evicts, in eviction order.
	Evicts []Eviction `json:"evicts"`
	// Margin is what is left once Admitted jobs run.
	Margin map[string]string `json:"margin"`
	// Cards says where the Admitted jobs land, as Capacity.Cards; absent
	// for a template pinned to one card.
	Cards []CardJobs `json:"cards,omitempty"`
}

// Eviction is one workload preempted on the path.
type Eviction struct {
	// Workload names it: the service's name, or "TEMPLATE job".
	Workload string `json:"workload"`
	Service  string `json:"service,omitempty"`
	Queue    string `json:"queue"`
	Priority string `json:"priority"`
	// Reason is Kueue's Preempted condition reason (InClusterQueue,
	// InCohortReclamation, InCohortReclaimWhileBorrowing).
	Reason string `json:"reason"`
	// Policy is the preemption setting that allows it
	// (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort).
	Policy string `json:"policy"`
	// Card is the card (flavor) the evicted workload held, for a row whose
	// template may land on several cards; absent otherwise.
	Card string `json:"card,omitempty"`
}

// variant is a template as rendered: the template itself, or its cache-free
// variant when that takes other locks.
type variant struct {
	name, base string
	cacheFree  bool
	t          policy.Template
	locks      []string
}

// variants are the policy's template variants (policy.Variants) that get
// rows: a cache-free variant only when it takes other locks than its
// template (same quota, same locks, same row).
func variants(p *policy.Policy) []variant {
	var out []variant
	for _, v := range p.Variants() {
		if v.CacheFree && slices.Equal(v.Locks, v.Template.Locks) || v.Template.Exclusive != nil {
			continue // an exclusive step has a section of its own (Exclusives)
		}
		out = append(out, variant{name: v.Name, base: v.Template.Name, cacheFree: v.CacheFree, t: v.Template, locks: v.Locks})
	}
	return out
}

// stateSnap is one state of a component: its always-on services admitted,
// then the on-demand services of up, each only if it fits.
type stateSnap struct {
	key string
	up  []int // local indexes of the component's services that are up
	// admittedSet holds the up ones Kueue admitted; admittedKey lists
	// them (the memo key: what Kueue admitted decides every count).
	admittedSet map[int]bool
	admittedKey string
	// snap is nil once released; snapOf rebuilds it.
	snap *Snapshot
	// unadmitted lists up services Kueue does not admit, with the
	// resources they are short of.
	unadmitted []unadmitted
	// declared is the GPU memory (MiB) the admitted services declare, by
	// card (a service is pinned to its card).
	declared map[string]int64
	sims     map[simKey]*quotaSim
}

type simKey struct{ base, prio string }

type unadmitted struct {
	service string
	short   []FlavorResource
	outcome Outcome
}

// explainer carries one Explain run.
type explainer struct {
	p        *policy.Policy
	ladder   []policy.Priority
	onDemand []string
	alwaysOn []string
	variants []variant
	memo     map[memoKey]*quotaSim
	rows     []Capacity
	findings finding.List

	// simJobs and scenario hold the workloads of one simulate and one
	// tryScenario.
	simJobs, scenario workloadArena
	// prioritiesOf memoizes priorities by namespace.
	prioritiesOf map[string][]policy.Priority
	// quantities memoizes quantity.
	quantities map[kindAmount]string

	comps         []*component
	compOfVariant []*component
	// compsOK counts the components with no reachable state.
	compsOK     int
	outlookList []Outlook
	// starving holds each row's smallest starving sets (local indexes).
	starving map[rowID][][]int

	// indexes, built once
	templatesBy map[string][]string // queue → template names, sorted
	servicesBy  map[string][]string // queue → service names, sorted
	cohortOf    map[string][]string // queue → the queues of its cohort (itself alone without one), sorted
	empty       *Snapshot           // the policy's snapshot with nothing admitted
}

type memoKey struct {
	comp, base, prio string
	admitted         string
}

// Explain runs the admission analysis with the default options (Options).
func Explain(p *policy.Policy) (*Report, error) { return ExplainWith(p, Options{}) }

// ExplainWith runs the admission analysis over a policy. The policy should
// have passed policy.Check (vet); Explain reports mixed GPU-memory units
// itself, for policies read from elsewhere. Its cost grows with the policy,
// not with 2^services (see component). It fails on an unknown States
// option, on States "all" for a policy with more than MaxOnDemand
// on-demand services, and with SizeLocks' finding.List on a lock sized
// from quota that computes to no size.
func ExplainWith(p *policy.Policy, o Options) (*Report, error) {
	p, sizes, analysed, err := sizeLocks(p)
	if err != nil {
		return nil, err
	}
	e := &explainer{
		p:        p,
		ladder:   p.Ladder(),
		onDemand: p.OnDemandServices(),
		memo:     map[memoKey]*quotaSim{},
		starving: map[rowID][][]int{},
	}
	mode := o.States
	if mode == "" {
		mode = StatesAuto
	}
	n := len(e.onDemand)
	var enumerate bool
	switch mode {
	case StatesAuto:
		enumerate = n <= AutoOnDemand
	case StatesAll:
		if n > MaxOnDemand {
			return nil, fmt.Errorf("states all: policy %q has %d on-demand services, 2^%d service states; per-state rows stop at %d services (%d states). Use states auto (the default: the answer per template and priority, and the findings) instead",
				p.Name, n, n, MaxOnDemand, 1<<MaxOnDemand)
		}
		enumerate = true
	case StatesNone:
	default:
		return nil, fmt.Errorf("unknown states option %q (want one of %s)", mode, strings.Join(StatesModes, ", "))
	}
	for _, n := range p.ServiceNames() {
		if p.Services[n].Mode != policy.OnDemand {
			e.alwaysOn = append(e.alwaysOn, n)
		}
	}
	e.variants = variants(p)
	e.index()
	exact := ExactServices
	if enumerate {
		exact = max(exact, n)
	} else if o.searchAll {
		exact = -1
	}
	e.buildComponents(exact)
	if enumerate {
		e.capacity()
	}
	e.outlooks()
	e.findingsAll()
	queueing := e.queueing()
	e.multiShare()
	e.findings.Sort()
	count := int64(-1)
	if n < 63 {
		count = int64(1) << n
	}
	r := &Report{
		Policy:    p.Name,
		Model:     "kueue " + KueueVersion + " classical preemption",
		OnDemand:  append([]string{}, e.onDemand...),
		States:    StatesInfo{Mode: mode, Enumerated: enumerate, Count: count, Limit: MaxOnDemand, AutoLimit: AutoOnDemand},
		Summary:   e.outlookList,
		Capacity:  e.rows,
		Findings:  e.findings,
		LockSizes: sizes,
		gateText:  gateOf(p),
		Queueing:  queueing,
	}
	if r.LockSizes == nil {
		r.LockSizes = []LockSize{}
	}
	if r.Summary == nil {
		r.Summary = []Outlook{}
	}
	if r.Capacity == nil {
		r.Capacity = []Capacity{}
	}
	if r.Findings == nil {
		r.Findings = []finding.Finding{}
	}
	r.Access = e.access()
	r.Exclusive = exclusivesKnown(p, analysed)
	r.Cohorts = CohortTree(p)
	return r, nil
}

func (e *explainer) index() {
	e.templatesBy = map[string][]string{}
	e.servicesBy = map[string][]string{}
	e.cohortOf = map[string][]string{}
	for _, n := range e.p.TemplateNames() {
		q := e.p.Templates[n].Queue
		e.templatesBy[q] = append(e.templatesBy[q], n)
	}
	for _, n := range e.p.ServiceNames() {
		q := e.p.Services[n].Queue
		e.servicesBy[q] = append(e.servicesBy[q], n)
	}
	// A cohort tree shares quota: its queues are grouped by its root.
	byCohort := map[string][]string{}
	for _, n := range e.p.QueueNames() {
		if c := e.p.CohortTree(n); c != "" {
			byCohort[c] = append(byCohort[c], n)
		}
	}
	for _, n := range e.p.QueueNames() {
		if c := e.p.CohortTree(n); c != "" {
			e.cohortOf[n] = byCohort[c]
		} else {
			e.cohortOf[n] = []string{n}
		}
	}
	e.empty = NewSnapshot(e.p)
}

// bit returns the state bit of on-demand service i. Service 0 is the most
// significant bit, so that masks in increasing order list the states with
// the first service down first.
func (e *explainer) bit(i int) uint32 { return 1 << (len(e.onDemand) - 1 - i) }

func (e *explainer) up(mask uint32, i int) bool { return mask&e.bit(i) != 0 }

func serviceWorkload(s *Snapshot, p *policy.Policy, name string) *Workload {
	return s.NewWorkload(serviceOf(p, name))
}

// serviceOf is the service's pod as a workload.
func serviceOf(p *policy.Policy, name string) Workload {
	sv := p.Services[name]
	return Workload{
		Name: name, Service: name, Queue: sv.Queue, Card: sv.Card,
		Priority: sv.Priority, Value: p.Priorities[sv.Priority].Value, Request: sv.Request,
	}
}

// quotaSim is what Kueue does with N identical jobs in one state, locks
// aside.
type quotaSim struct {
	avail0      map[policy.Kind]int64 // Available before any job
	quotaAdmits int64
	never       bool
	binding     []policy.Kind
	// with preemption
	preemptAdmits int64
	evicts        []Eviction
	preemptMargin map[policy.Kind]int64
	// For a template that may land on several cards (flavors.go): the
	// cards in Kueue's order, the card each admitted job got (quota
	// admits first, then those admitted by preempting), and Available per
	// card before any job and once the preemption path is done.
	cards  []string
	landed []string
	// borrowed says, per landed job, whether Kueue admitted it borrowing
	// (borrows).
	borrowed  []bool
	availBy   map[string]map[policy.Kind]int64
	preemptBy map[string]map[policy.Kind]int64
}

func (e *explainer) jobWorkload(s *Snapshot, v variant, pr policy.Priority) *Workload {
	return s.NewWorkload(jobOf(v, pr))
}

// jobOf is a job of the variant's template at pr.
func jobOf(v variant, pr policy.Priority) Workload {
	return Workload{
		Name: v.base + " job", Template: v.base, Queue: v.t.Queue, Card: v.t.Card,
		Priority: pr.Name, Value: pr.Value, Request: v.t.Request,
	}
}

// simulate submits jobs of a template at a priority into a state's snapshot
// and undoes everything afterwards: first as many as fit without
// preemption, then as many more as Kueue admits by preempting.
func (e *explainer) simulate(s *Snapshot, v variant, pr policy.Priority) *quotaSim {
	if _, ok := s.queues[v.t.Queue]; !ok {
		return &quotaSim{never: true, avail0: map[policy.Kind]int64{}}
	}
	sim := &quotaSim{avail0: map[policy.Kind]int64{}}
	if cards := s.cardsOf(&Workload{Template: v.base}); len(cards) > 1 {
		sim.cards = cards
		sim.availBy = s.availableBy(v.t.Queue, cards)
	}
	sim.avail0 = s.availableSum(v.t.Queue, v.t.Card, sim.availBy)
	// Every job is removed again below: they live in the arena.
	e.simJobs.reset()
	job := jobOf(v, pr)
	added := e.simJobs.added[:0]
	var evicted []*Workload
	defer func() {
		for _, w := range added {
			s.Remove(w)
		}
		e.simJobs.added = added[:0]
		for _, w := range evicted {
			s.restore(w)
		}
	}()
	for len(added) < maxJobs {
		w := e.simJobs.new(s, job)
		d := s.Decide(w)
		if d.Outcome != Admit {
			for _, fr := range d.Short {
				sim.binding = append(sim.binding, fr.Kind)
			}
			sim.never = d.Outcome == NoFit && len(added) == 0
			break
		}
		if sim.cards != nil {
			sim.borrowed = append(sim.borrowed, e.borrows(s, w))
			sim.landed = append(sim.landed, w.Card)
		}
		s.Add(w)
		added = append(added, w)
	}
	sim.quotaAdmits = int64(len(added))
	sim.preemptAdmits = sim.quotaAdmits
	for len(added) < maxJobs {
		w := e.simJobs.new(s, job)
		d := s.Decide(w)
		if d.Outcome == Preempt {
			for _, t := range d.Targets {
				s.Remove(t.Workload)
				evicted = append(evicted, t.Workload)
				ev := e.eviction(t)
				if sim.cards != nil {
					ev.Card = t.Workload.Card
				}
				sim.evicts = append(sim.evicts, ev)
			}
			d = s.Decide(w)
		}
		if d.Outcome != Admit {
			break
		}
		if sim.cards != nil {
			sim.borrowed = append(sim.borrowed, e.borrows(s, w))
			sim.landed = append(sim.landed, w.Card)
		}
		s.Add(w)
		added = append(added, w)
	}
	if len(evicted) > 0 {
		sim.preemptAdmits = int64(len(added))
		if sim.cards != nil {
			sim.preemptBy = s.availableBy(v.t.Queue, sim.cards)
		}
		sim.preemptMargin = s.availableSum(v.t.Queue, v.t.Card, sim.preemptBy)
	}
	return sim
}

func (e *explainer) eviction(t Target) Eviction { return evictionOf(t) }

// capacity enumerates the per-state rows: each row is its component's
// row at the state's projection on the component's services.
func (e *explainer) capacity() {
	n := len(e.onDemand)
	states := 1 << n
	local := func(c *component, mask uint32) []int {
		var up []int
		for j, i := range c.services {
			if e.up(mask, i) {
				up = append(up, j)
			}
		}
		return up
	}
	reach := make([]bool, states)
	for m := range reach {
		reach[m] = true
		for _, c := range e.comps {
			if len(e.evalState(c, local(c, uint32(m))).unadmitted) > 0 {
				reach[m] = false
				break
			}
		}
	}
	for vi, v := range e.variants {
		c := e.compOfVariant[vi]
		for _, pr := range e.ladder {
			for m := 0; m < states; m++ {
				mask := uint32(m)
				st := e.evalState(c, local(c, mask))
				state := make(map[string]string, n)
				for i, name := range e.onDemand {
					if e.up(mask, i) {
						state[name] = policy.ServiceUp
					} else {
						state[name] = policy.ServiceDown
					}
				}
				e.rows = append(e.rows, e.row(v, pr, state, reach[m], e.sim(c, st, v, pr)))
			}
		}
	}
}

// smallestLock is the step's lock with the smallest size
// (policy.SmallestLock).
func (e *explainer) smallestLock(v variant) (policy.Lock, bool) {
	return e.p.SmallestLock(v.locks)
}

func (e *explainer) row(v variant, pr policy.Priority, state map[string]string, reachable bool, sim *quotaSim) Capacity {
	c := Capacity{
		Template: v.name, BaseTemplate: v.base, CacheFree: v.cacheFree,
		Queue: v.t.Queue, Card: v.t.Card, Priority: pr.Name, PriorityValue: pr.Value,
		State:       state,
		Reachable:   reachable,
		QuotaAdmits: sim.quotaAdmits,
		Admitted:    sim.quotaAdmits,
		BoundBy:     "quota",
		Binding:     []string{},
		Margin:      map[string]string{},
		PerResource: map[string]int64{},
	}
	if sim.never {
		c.BoundBy = "never-fits"
	}
	for _, k := range sim.binding {
		c.Binding = append(c.Binding, e.p.Resource(k))
	}
	kueue := sim.quotaAdmits
	if sim.evicts != nil {
		kueue = sim.preemptAdmits
	}
	lockSize := int64(-1)
	if l, ok := e.smallestLock(v); ok {
		lockSize = l.Size
		le := &LockEffect{Name: l.Name, Size: l.Size, Kueue: kueue}
		switch {
		case l.Size < kueue:
			le.Effect = "limits"
		case l.Size == kueue:
			le.Effect = "matches"
		default:
			le.Effect = "exceeds"
			le.Held = l.Size - kueue
		}
		c.Lock = le
		if l.Size < sim.quotaAdmits {
			c.Admitted = l.Size
			c.BoundBy = "lock"
		}
	}
	for _, k := range policy.Kinds {
		req := v.t.Request.Get(k)
		if req <= 0 {
			continue
		}
		res := e.p.Resource(k)
		c.Margin[res] = e.quantity(k, sim.avail0[k]-c.Admitted*req)
		c.PerResource[res] = sim.avail0[k] / req
		if sim.cards != nil {
			c.PerResource[res] = 0
			for _, card := range sim.cards {
				c.PerResource[res] += sim.availBy[card][k] / req
			}
		}
	}
	c.Cards = e.cardJobs(v, sim, sim.availBy, c.Admitted)
	if sim.evicts != nil {
		pp := &PreemptionPath{QuotaAdmits: sim.preemptAdmits, Admitted: sim.preemptAdmits, Evicts: sim.evicts, Margin: map[string]string{}}
		if lockSize >= 0 && lockSize < pp.Admitted {
			pp.Admitted = lockSize
		}
		for _, k := range policy.Kinds {
			req := v.t.Request.Get(k)
			if req <= 0 {
				continue
			}
			// Margin once pp.Admitted (not pp.QuotaAdmits) jobs run.
			pp.Margin[e.p.Resource(k)] = e.quantity(k, sim.preemptMargin[k]+(pp.QuotaAdmits-pp.Admitted)*req)
		}
		pp.Cards = e.cardJobsAfter(v, sim, pp.Admitted)
		c.Preemption = pp
	}
	return c
}

// kindAmount is an amount of one resource kind.
type kindAmount struct {
	k policy.Kind
	v int64
}

// quantity is k.QuantityString(v), formatted once per amount: the rows'
// margins repeat a few amounts thousands of times.
func (e *explainer) quantity(k policy.Kind, v int64) string {
	if s, ok := e.quantities[kindAmount{k, v}]; ok {
		return s
	}
	s := k.QuantityString(v)
	if e.quantities == nil {
		e.quantities = map[kindAmount]string{}
	}
	e.quantities[kindAmount{k, v}] = s
	return s
}

// upServices lists the on-demand services up in a mask.
func (e *explainer) upServices(mask uint32) []string {
	var out []string
	for i, n := range e.onDemand {
		if e.up(mask, i) {
			out = append(out, n)
		}
	}
	return out
}

func popcount(m uint32) int { return bits.OnesCount32(m) }

func sortedStrings(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
