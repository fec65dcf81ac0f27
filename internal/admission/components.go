package admission

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The analysis does not enumerate the policy's service states. A workload
// asks one card, and Kueue's quota arithmetic for a (card, kind) cell only
// involves the ClusterQueue and, through borrowing and lending, the other
// queues of its cohort (a queue without a cohort is alone). So the rows of
// a template depend only on the on-demand services on the same card in the
// same cohort: a component. Components are independent; a service outside
// a row's component cannot change it, whatever else is up.
//
// A component with at most ExactServices on-demand services is enumerated
// (2^k local states, k its own services). A larger one is searched, within
// SearchBudget states: every service down, all up, each alone, then sets of
// growing size for the smallest sets that starve a row, where services with
// equal effect (same queue, priority and request) count once per number
// taken. What was searched is reported (Search), never silently cut.

// ExactServices is the number of on-demand services in one component (same
// card, same cohort) up to which every up/down combination is evaluated.
const ExactServices = 10

// SearchBudget bounds the service states the bounded search evaluates per
// template × priority in a component above ExactServices.
const SearchBudget = 512

// Outlook is the answer for one template × priority, whatever the number of
// on-demand services: jobs at once with every on-demand service down
// (best) and all up (worst), what each service does alone, and the
// smallest sets of services whose being up starves the priority.
type Outlook struct {
	Template      string `json:"template"`
	BaseTemplate  string `json:"baseTemplate"`
	CacheFree     bool   `json:"cacheFree"`
	Queue         string `json:"queue"`
	Card          string `json:"card"`
	Priority      string `json:"priority"`
	PriorityValue int32  `json:"priorityValue"`
	// Services are the on-demand services that can change the answer: on
	// the same card in the queue's cohort (its own queue without one),
	// sorted. No other service can.
	Services []string `json:"services"`
	// Best is the answer with every on-demand service down, Worst with
	// every one of Services up.
	Best  Answer `json:"best"`
	Worst Answer `json:"worst"`
	// Effects has one answer per entry of Services: that service up, the
	// others down.
	Effects []Answer `json:"effects"`
	// StarvedBy lists the smallest sets of Services whose being up (the
	// others down) leaves the priority 0 jobs with no preemption path, in a
	// state Kueue can reach; smallest first. A set stands for every set
	// that swaps a service for one of the same EqualEffect class.
	StarvedBy [][]string `json:"starvedBy"`
	// EqualEffect lists the classes of two or more Services that ask the
	// same of the same queue at the same priority.
	EqualEffect [][]string `json:"equalEffect"`
	Search      Search     `json:"search"`
}

// Answer is what N jobs of a template at a priority get in one service
// state: the fields of a capacity row that answer the question.
type Answer struct {
	// Up lists the on-demand services up (of the outlook's Services).
	Up          []string `json:"up"`
	Reachable   bool     `json:"reachable"`
	Admitted    int64    `json:"admitted"`
	QuotaAdmits int64    `json:"quotaAdmits"`
	BoundBy     string   `json:"boundBy"`
	Binding     []string `json:"binding"`
	// Preemption is the preemption path, null when preemption adds
	// nothing.
	Preemption *PreemptionPath `json:"preemption"`
	// Cards says where the Admitted jobs land, as Capacity.Cards.
	Cards []CardJobs `json:"cards,omitempty"`
	// Starved is true when the state is reachable, no job is admitted and
	// no preemption path admits one.
	Starved bool `json:"starved"`
}

// Search says how StarvedBy was found.
type Search struct {
	// Exact is true when every up/down combination of Services was
	// evaluated (at most ExactServices of them).
	Exact bool `json:"exact"`
	// States is the number of service states evaluated.
	States int `json:"states"`
	// MaxSetSize is the size up to which every set of Services was
	// searched for StarvedBy (len(Services) when Exact).
	MaxSetSize int `json:"maxSetSize"`
	// Note says what the bound left out; "" when Exact.
	Note string `json:"note,omitempty"`
}

// StatesInfo says whether the per-state capacity rows were enumerated.
type StatesInfo struct {
	// Mode is the states option: "auto", "all" or "none".
	Mode string `json:"mode"`
	// Enumerated is true when capacity has a row per service state.
	Enumerated bool `json:"enumerated"`
	// Count is the number of service states (2^len(onDemand)), or -1 when
	// it does not fit in a number.
	Count int64 `json:"count"`
	// Limit is the most on-demand services "all" enumerates (MaxOnDemand),
	// AutoLimit the most "auto" does (AutoOnDemand).
	Limit     int `json:"limit"`
	AutoLimit int `json:"autoLimit"`
}

// component is the on-demand services that can change the rows of one card
// in one cohort (or one queue without a cohort), with the templates whose
// rows they are.
type component struct {
	key      string
	card     string
	keep     map[string]bool // the queues of the cohort
	alwaysOn []string        // always-on services, by name
	services []int           // indexes into explainer.onDemand, by name
	variants []int           // indexes into explainer.variants
	exact    bool
	states   map[string]*stateSnap
	// scan lists the states the findings read: every state when exact;
	// otherwise all down, all up, each alone and the starving sets found.
	scan     []string
	scanSeen map[string]bool
	classes  [][]int // local indexes of services with equal effect
}

func upKey(up []int) string {
	var b strings.Builder
	for i, j := range up {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(j))
	}
	return b.String()
}

func (e *explainer) groupKey(queue string) string {
	if c := e.p.CohortTree(queue); c != "" {
		return "cohort/" + c // the root of its cohort tree
	}
	return "queue/" + queue
}

// buildComponents groups services and template variants into components.
// A component with at most exactLimit on-demand services is enumerated.
func (e *explainer) buildComponents(exactLimit int) {
	byKey := map[string]*component{}
	cardOf := e.cardGroups()
	get := func(queue, card string) *component {
		k := e.groupKey(queue) + "\x00" + cardOf(queue, card)
		c := byKey[k]
		if c == nil {
			keep := map[string]bool{}
			if qs, ok := e.cohortOf[queue]; ok {
				for _, q := range qs {
					keep[q] = true
				}
			} else {
				keep[queue] = true
			}
			c = &component{key: k, card: card, keep: keep, states: map[string]*stateSnap{}, scanSeen: map[string]bool{}}
			byKey[k] = c
		}
		return c
	}
	for _, n := range e.alwaysOn {
		s := e.p.Services[n]
		c := get(s.Queue, s.Card)
		c.alwaysOn = append(c.alwaysOn, n)
	}
	for i, n := range e.onDemand {
		s := e.p.Services[n]
		c := get(s.Queue, s.Card)
		c.services = append(c.services, i)
	}
	for vi, v := range e.variants {
		c := get(v.t.Queue, v.t.Card)
		c.variants = append(c.variants, vi)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.compOfVariant = make([]*component, len(e.variants))
	for _, k := range keys {
		c := byKey[k]
		c.exact = len(c.services) <= exactLimit
		c.classes = e.equalEffect(c)
		e.comps = append(e.comps, c)
		for _, vi := range c.variants {
			e.compOfVariant[vi] = c
		}
	}
	for _, c := range e.comps {
		if c.exact {
			for m := 0; m < 1<<len(c.services); m++ {
				e.noteScan(c, e.evalState(c, maskUp(m, len(c.services))))
			}
		} else {
			e.noteScan(c, e.evalState(c, nil))
			e.noteScan(c, e.evalState(c, allUp(len(c.services))))
			for j := range c.services {
				e.noteScan(c, e.evalState(c, []int{j}))
			}
		}
	}
	e.compsOK = 0
	for _, c := range e.comps {
		if !e.compReachable(c) {
			e.compsOK++
		}
	}
}

// othersReachable reports whether every component other than c has a
// reachable state: only then does a reachable state of c make a reachable
// state of the policy.
func (e *explainer) othersReachable(c *component) bool {
	bad := e.compsOK
	if !e.compReachable(c) {
		bad--
	}
	return bad == 0
}

func (e *explainer) compReachable(c *component) bool {
	for _, k := range c.scan {
		if len(c.states[k].unadmitted) == 0 {
			return true
		}
	}
	return false
}

// maskUp lists the bits set in m, low bit first: local service indexes.
// Local index j is bit len-1-j, so that masks in increasing order list the
// first service's "down" first, as the per-state rows do.
func maskUp(m, n int) []int {
	var up []int
	for j := 0; j < n; j++ {
		if m&(1<<(n-1-j)) != 0 {
			up = append(up, j)
		}
	}
	return up
}

func allUp(n int) []int {
	up := make([]int, n)
	for j := range up {
		up[j] = j
	}
	return up
}

func (e *explainer) noteScan(c *component, st *stateSnap) {
	if !c.scanSeen[st.key] {
		c.scanSeen[st.key] = true
		c.scan = append(c.scan, st.key)
	}
}

// equalEffect groups a component's services that ask the same of the same
// queue at the same priority: which of them is up changes no count.
func (e *explainer) equalEffect(c *component) [][]int {
	type sig struct {
		queue, prio string
		req         policy.Request
	}
	idx := map[sig]int{}
	var out [][]int
	for j, i := range c.services {
		s := e.p.Services[e.onDemand[i]]
		k := sig{s.Queue, s.Priority, s.Request}
		ci, ok := idx[k]
		if !ok {
			ci = len(out)
			idx[k] = ci
			out = append(out, nil)
		}
		out[ci] = append(out[ci], j)
	}
	return out
}

// evalState builds (once) the state of a component in which the services
// at local indexes up are up and the others down: the cohort's snapshot
// with its always-on services admitted, then the up ones, each only if it
// fits.
func (e *explainer) evalState(c *component, up []int) *stateSnap {
	key := upKey(up)
	if st := c.states[key]; st != nil {
		return st
	}
	st := &stateSnap{key: key, up: up, sims: map[simKey]*quotaSim{}}
	e.fillState(c, st)
	var adm []int
	for _, j := range up {
		if st.admittedSet[j] {
			adm = append(adm, j)
		}
	}
	st.admittedKey = upKey(adm)
	c.states[key] = st
	return st
}

// fillState builds a state's snapshot (again, after release).
func (e *explainer) fillState(c *component, st *stateSnap) {
	st.snap = newSnapshotOf(e.p, c.keep)
	st.unadmitted = nil
	st.admittedSet = map[int]bool{}
	st.declared = map[string]int64{}
	admit := func(name string) bool {
		sv := e.p.Services[name]
		if _, ok := st.snap.queues[sv.Queue]; !ok {
			return false
		}
		w := serviceWorkload(st.snap, e.p, name)
		d := st.snap.Decide(w)
		if d.Outcome != Admit {
			st.unadmitted = append(st.unadmitted, unadmitted{name, d.Short, d.Outcome})
			return false
		}
		st.snap.Add(w)
		st.declared[sv.Card] += sv.Request.GPUMemoryMiB
		return true
	}
	for _, n := range c.alwaysOn {
		admit(n)
	}
	for _, j := range st.up {
		if admit(e.onDemand[c.services[j]]) {
			st.admittedSet[j] = true
		}
	}
}

// snapOf returns a state's snapshot, rebuilding it after release.
func (e *explainer) snapOf(c *component, st *stateSnap) *Snapshot {
	if st.snap == nil {
		e.fillState(c, st)
	}
	return st.snap
}

// release drops the snapshots of a searched component's states.
func (e *explainer) release(c *component) {
	if c.exact {
		return
	}
	for _, st := range c.states {
		st.snap = nil
	}
}

// sim is what N jobs of v at pr get in a state (memoized per admitted set).
func (e *explainer) sim(c *component, st *stateSnap, v variant, pr policy.Priority) *quotaSim {
	k := simKey{v.base, pr.Name}
	if s := st.sims[k]; s != nil {
		return s
	}
	mk := memoKey{c.key, v.base, pr.Name, st.admittedKey}
	s := e.memo[mk]
	if s == nil {
		s = e.simulate(e.snapOf(c, st), v, pr)
		e.memo[mk] = s
	}
	st.sims[k] = s
	return s
}

// localState maps a component's services to up/down.
func (e *explainer) localState(c *component, up []int) map[string]string {
	m := make(map[string]string, len(c.services))
	for _, i := range c.services {
		m[e.onDemand[i]] = policy.ServiceDown
	}
	for _, j := range up {
		m[e.onDemand[c.services[j]]] = policy.ServiceUp
	}
	return m
}

func (e *explainer) names(c *component, up []int) []string {
	out := make([]string, 0, len(up))
	for _, j := range up {
		out = append(out, e.onDemand[c.services[j]])
	}
	return out
}

// rowAt is the capacity row of v at pr in a component's state; its
// reachability counts the other components too.
func (e *explainer) rowAt(c *component, v variant, pr policy.Priority, st *stateSnap) Capacity {
	return e.row(v, pr, e.localState(c, st.up), e.reachableAt(c, st), e.sim(c, st, v, pr))
}

// reachableAt is rowAt's Reachable: the state admits every service up in
// it, and every other component has such a state.
func (e *explainer) reachableAt(c *component, st *stateSnap) bool {
	return len(st.unadmitted) == 0 && e.othersReachable(c)
}

func starved(r *Capacity) bool { return r.Reachable && r.QuotaAdmits == 0 && r.Preemption == nil }

// starvedSim is starved of the row that row builds from sim, without
// building it (row sets Preemption exactly when sim evicts).
func starvedSim(reachable bool, sim *quotaSim) bool {
	return reachable && sim.quotaAdmits == 0 && sim.evicts == nil
}

func (e *explainer) answer(c *component, v variant, pr policy.Priority, up []int) Answer {
	st := e.evalState(c, up)
	// The row without its state map: an answer names Up instead.
	r := e.row(v, pr, nil, e.reachableAt(c, st), e.sim(c, st, v, pr))
	a := Answer{Up: e.names(c, up), Reachable: r.Reachable, Admitted: r.Admitted, QuotaAdmits: r.QuotaAdmits,
		BoundBy: r.BoundBy, Binding: r.Binding, Preemption: r.Preemption, Starved: starved(&r), Cards: r.Cards}
	if a.Up == nil {
		a.Up = []string{}
	}
	return a
}

// outlooks computes the answer per template × priority.
func (e *explainer) outlooks() {
	for vi, v := range e.variants {
		c := e.compOfVariant[vi]
		for _, pr := range e.ladder {
			o := Outlook{
				Template: v.name, BaseTemplate: v.base, CacheFree: v.cacheFree,
				Queue: v.t.Queue, Card: v.t.Card, Priority: pr.Name, PriorityValue: pr.Value,
				Services: e.names(c, allUp(len(c.services))), Effects: []Answer{},
				StarvedBy: [][]string{}, EqualEffect: [][]string{},
			}
			o.Best = e.answer(c, v, pr, nil)
			o.Worst = e.answer(c, v, pr, allUp(len(c.services)))
			for j := range c.services {
				o.Effects = append(o.Effects, e.answer(c, v, pr, []int{j}))
			}
			for _, cl := range c.classes {
				if len(cl) > 1 {
					o.EqualEffect = append(o.EqualEffect, e.names(c, cl))
				}
			}
			sets, search := e.starvingSets(c, v, pr)
			for _, s := range sets {
				o.StarvedBy = append(o.StarvedBy, e.names(c, s))
				e.noteScan(c, e.evalState(c, s))
			}
			o.Search = search
			e.outlookList = append(e.outlookList, o)
			e.starving[rowID{vi, pr.Name}] = sets
			e.release(c)
		}
	}
}

type rowID struct {
	variant int
	prio    string
}

func (e *explainer) starvesAt(c *component, v variant, pr policy.Priority, up []int) bool {
	st := e.evalState(c, up)
	return starvedSim(e.reachableAt(c, st), e.sim(c, st, v, pr))
}

// starvingSets finds the smallest sets of a component's services whose
// being up starves v at pr: every set when the component is exact, else
// sets of growing size within SearchBudget states.
func (e *explainer) starvingSets(c *component, v variant, pr policy.Priority) ([][]int, Search) {
	n := len(c.services)
	var found [][]int
	contains := func(up []int) bool {
		in := map[int]bool{}
		for _, j := range up {
			in[j] = true
		}
	next:
		for _, f := range found {
			for _, j := range f {
				if !in[j] {
					continue next
				}
			}
			return true
		}
		return false
	}
	if c.exact {
		masks := make([]int, 1<<n)
		for m := range masks {
			masks[m] = m
		}
		sort.SliceStable(masks, func(a, b int) bool { return popcount(uint32(masks[a])) < popcount(uint32(masks[b])) })
		for _, m := range masks {
			up := maskUp(m, n)
			if !contains(up) && e.starvesAt(c, v, pr, up) {
				found = append(found, up)
			}
		}
		return found, Search{Exact: true, States: 1 << n, MaxSetSize: n}
	}
	// Bounded: sets of growing size, one per number taken from each class
	// of equal effect (the first members of the class).
	budget := SearchBudget
	states := 0
	maxSize := 0
	complete := true
	if e.starvesAt(c, v, pr, nil) {
		return [][]int{{}}, Search{States: 1, MaxSetSize: n,
			Note: "it starves with every on-demand service down, so no set of services is needed"}
	}
	states++
	for size := 1; size <= n && complete; size++ {
		var sets [][]int
		var gen func(ci, left int, cur []int)
		gen = func(ci, left int, cur []int) {
			if len(sets) > budget-states {
				return
			}
			if left == 0 {
				sets = append(sets, append([]int(nil), cur...))
				return
			}
			if ci == len(c.classes) {
				return
			}
			cl := c.classes[ci]
			for take := min(left, len(cl)); take >= 0; take-- {
				gen(ci+1, left-take, append(cur, cl[:take]...))
			}
		}
		gen(0, size, nil)
		if len(sets) > budget-states {
			complete = false
			break
		}
		for _, s := range sets {
			sort.Ints(s)
			if contains(s) {
				continue
			}
			states++
			if e.starvesAt(c, v, pr, s) {
				found = append(found, s)
			}
		}
		maxSize = size
	}
	sr := Search{States: states, MaxSetSize: maxSize}
	if maxSize < n {
		worst := e.starvesAt(c, v, pr, allUp(n))
		sr.Note = fmt.Sprintf("%d on-demand services share this quota (2^%d states); every set of up to %d of them was searched (%d states, budget %d)",
			n, n, maxSize, states, SearchBudget)
		if worst && len(found) == 0 {
			sr.Note += "; with all of them up it starves, so a larger set does"
		} else if !worst {
			sr.Note += "; with all of them up it does not starve"
		}
	} else {
		sr.Note = fmt.Sprintf("%d on-demand services share this quota; services of equal effect were searched once per number taken (%d states)", n, states)
	}
	return found, sr
}

// stateWords says under which service state something holds, as an
// adverbial phrase: "while qwen2-5-7b is up", "while every on-demand
// service is down", "while a and b are up"; "with every service up (all
// are always-on)" when the policy has no on-demand service, and "whatever
// the on-demand services do (none shares this quota)" when the
// component's quota is shared with none.
func (e *explainer) stateWords(c *component, up []int) string {
	if len(e.onDemand) == 0 {
		return "with every service up (all are always-on)"
	}
	if len(c.services) == 0 {
		return "whatever the on-demand services do (none shares this quota)"
	}
	names := e.names(c, up)
	switch {
	case len(names) == 0 && len(c.services) == 1:
		return "while " + e.onDemand[c.services[0]] + " is down"
	case len(names) == 0:
		return "while every on-demand service is down"
	case len(names) == 1:
		return "while " + names[0] + " is up"
	}
	return "while " + strings.Join(names, " and ") + " are up"
}
