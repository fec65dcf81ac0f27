package admission

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// The proof behind a dead-preemption error. The cold-start scenarios of
// searchPreemption only ever show that a path fires; when they do not, a
// path is called dead only by a reason that holds in every state
// (deadReasons: no cohort, nothing lent, nothing runs in the queue, ...) or
// by the exhaustive search below, over every state Kueue can reach in the
// cohort (a lone ClusterQueue alone).
//
// Why the search is exhaustive. A state is the set of admitted workloads,
// with the order in which Kueue reserved their quota. Workloads arrive
// (jobs of the cohort's templates at every rung of the ladder, any number
// of them; each service, one pod), are admitted when they fit or by
// evicting others as Decide says, finish (jobs end, on-demand services
// scale down, a Deployment's pod is replaced) and, evicted, come back as
// new arrivals (Kueue requeues them, ordered by the eviction time). Any
// workload may finish at any time and any one may arrive at any time, so
// from every state every subset of it, in the same order, is reachable, and
// from the empty state every feasible set of workloads in every admission
// order: Kueue's quota constraints (usage ≤ nominal + borrowingLimit,
// the cohort's usage ≤ what its queues lend, resource_node.go) only grow
// with usage, so a subset of a feasible set is feasible and any order of a
// feasible set is admitted one workload at a time without preemption. An
// eviction's result (targets out, preemptor in) is itself feasible. The
// reachable states are therefore exactly the feasible sets in every order;
// the quotas bound their size (every job asks at least one share).
//
// What of a state Decide reads: the usage (a function of the set), each
// candidate's priority, request and queue, the reservation order among
// candidates of the same priority (CandidatesOrdering sorts by priority
// first), and, under LowerOrNewerEqualPriority only, which equal-priority
// workloads were created after the preemptor (a preemptor that waited can
// be older than workloads admitted meanwhile). The search enumerates the
// sets sorted by priority, every order within one priority where a
// preemptor could take a workload of that priority, and every split of the
// preemptor's equal-priority workloads into older and newer; the preemptor
// is each template job at each rung and each service not running. Each
// combination is one state of the count. The only approximation is
// towards more states (a pending workload that fits is admitted within a
// scheduling cycle; the search also tries the instant before), so "no
// state fires it" is a proof; a search cut at DeadSearchBudget states
// proves nothing and says so.

// DeadSearchBudget bounds the states the exhaustive dead-path search
// visits per cohort; beyond it, a path not seen firing is a warning ("not
// found within N states"), never an error.
const DeadSearchBudget = 20000

// wclass is one kind of workload of a cohort: a template's job at one
// priority (any number of them) or a service's pod (one).
type wclass struct {
	queue, template, service string
	card                     string
	prio                     string
	value                    int32
	req                      policy.Request
	// pinned is set on the copies of a job class whose template may land
	// on several cards (policy.TemplateCards): one copy per card, with
	// the job held on it. Kueue puts such a job on the first card that
	// fits when it arrives, and the jobs on the cards before it may finish
	// later, so a job may sit on any of its cards in a reachable state;
	// the copies give the search those states. They are never preemptors
	// (a preemptor's card is Kueue's choice: the unpinned class).
	pinned bool
}

func (c wclass) workload(s *Snapshot) *Workload {
	name := c.template + " job"
	if c.service != "" {
		name = c.service
	}
	w := Workload{Name: name, Service: c.service, Template: c.template, Queue: c.queue, Card: c.card,
		Priority: c.prio, Value: c.value, Request: c.req}
	if c.pinned {
		w.Cards = []string{c.card}
	}
	return s.NewWorkload(w)
}

// Witness is one state of a cohort and a preemptor tried in it: the
// workloads admitted, in the order Kueue reserved their quota, then the
// preemptor that arrives.
type Witness struct {
	Running   []Workload
	Preemptor Workload
	// Newer lists the indexes in Running of the workloads created after the
	// preemptor (LowerOrNewerEqualPriority), empty otherwise.
	Newer []int
}

// words describes a witness: "with 4 batch gpu-step jobs, asr up, a
// on-demand-llm qwen2-5-7b arriving".
func (w *Witness) words() string {
	counts := map[string]int{}
	var order []string
	for _, x := range w.Running {
		k := x.Name + " (" + x.Priority + ", " + x.Queue + ")"
		if x.Service != "" {
			k = x.Service + " up"
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range order {
		if counts[k] > 1 {
			parts = append(parts, fmt.Sprintf("%d × %s", counts[k], k))
		} else {
			parts = append(parts, k)
		}
	}
	run := "nothing running"
	if len(parts) > 0 {
		run = strings.Join(parts, ", ")
	}
	p := w.Preemptor
	who := fmt.Sprintf("a %s %s job", p.Priority, p.Template)
	if p.Service != "" {
		who = "a waking " + p.Service
	}
	return fmt.Sprintf("with %s, %s", run, who)
}

// exhaustiveResult is what the exhaustive search found for one cohort.
type exhaustiveResult struct {
	// fired maps queue → setting → a witness in which it fires.
	fired map[string]map[string]*Witness
	// closest maps queue → setting → the state, among those where a
	// preemptor of the queue is admitted or waits without preempting
	// (Decide: Admit or Wait), with the most workloads the setting names as
	// victims (its policy and, for borrowWithinCohort, the threshold),
	// then a wait, then the most running where the setting looks: the
	// nearest Kueue comes to firing it.
	closest  map[string]map[string]*Witness
	closestN map[string]map[string]int
	// states counts the states the exhaustive enumeration visited (a set
	// in one order, with one split of the preemptor's equal-priority
	// workloads), seeded the seed states tried first (seeds); both count
	// against DeadSearchBudget.
	states, seeded int
	cut            bool
}

// deadSettings are the three preemption settings a search looks for.
var deadSettings = []string{"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"}

func enabledSetting(pre policy.Preemption, setting string) bool {
	switch setting {
	case "withinClusterQueue":
		return policyEnabled(pre.WithinClusterQueue)
	case "reclaimWithinCohort":
		return policyEnabled(pre.ReclaimWithinCohort)
	case "borrowWithinCohort":
		return borrowWithinCohortEnabled(pre)
	}
	return false
}

// classes lists the cohort's workload classes, sorted by priority value,
// then queue, then name.
func (e *explainer) classes(g group) []wclass {
	var out []wclass
	for _, q := range g.queues {
		for _, tn := range e.templatesBy[q] {
			t := e.p.Templates[tn]
			cards := e.p.TemplateCards(t)
			for _, pr := range e.ladder {
				out = append(out, wclass{queue: q, template: tn, card: t.Card, prio: pr.Name, value: pr.Value, req: t.Request})
				if len(cards) > 1 {
					for _, card := range cards {
						out = append(out, wclass{queue: q, template: tn, card: card, prio: pr.Name, value: pr.Value, req: t.Request, pinned: true})
					}
				}
			}
		}
		for _, n := range e.servicesBy[q] {
			sv := e.p.Services[n]
			out = append(out, wclass{queue: q, service: n, card: sv.Card, prio: sv.Priority, value: e.p.Priorities[sv.Priority].Value, req: sv.Request})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

// exhaustive searches every reachable state of a group (see above) for
// the settings in want (queue → settings), stopping early once all fired
// unless closest is asked for.
func (e *explainer) exhaustive(g group, want map[string][]string, closest bool) *exhaustiveResult {
	res := &exhaustiveResult{fired: map[string]map[string]*Witness{}, closest: map[string]map[string]*Witness{}, closestN: map[string]map[string]int{}}
	g = e.treeOf(g)
	e.exhaustiveIn(g, want, closest, res)
	return res
}

// exhaustiveMemo runs exhaustive once per shape of cohort: cohorts that
// differ only in names (queues, cards, templates, services, priorities)
// have the same reachable states up to renaming, so the same verdicts
// (a generated policy repeats one shape a hundred times). memo maps a
// shape (groupShape) to its verdicts by queue index.
func (e *explainer) exhaustiveMemo(g group, want map[string][]string, memo map[string]*exhaustiveResult) *exhaustiveResult {
	g = e.treeOf(g)
	key, ok := e.groupShape(g, want)
	if !ok {
		return e.exhaustive(g, want, false)
	}
	if m := memo[key]; m != nil {
		// Rename: m.fired is keyed by queue index.
		res := &exhaustiveResult{fired: map[string]map[string]*Witness{}, states: m.states, seeded: m.seeded, cut: m.cut}
		for i, q := range g.queues {
			if f := m.fired[fmt.Sprint(i)]; f != nil {
				res.fired[q] = f
			}
		}
		return res
	}
	res := e.exhaustive(g, want, false)
	m := &exhaustiveResult{fired: map[string]map[string]*Witness{}, states: res.states, seeded: res.seeded, cut: res.cut}
	for i, q := range g.queues {
		if f := res.fired[q]; f != nil {
			m.fired[fmt.Sprint(i)] = f
		}
	}
	memo[key] = m
	return res
}

// groupShape is a group's shape with names left out: per queue (in name
// order), its quotas per card (cards renamed by first use), preemption and
// threshold value and the settings searched; then every workload class
// (exhaustive's order) by queue index, card, priority value and request.
// ok is false for a policy with Cohort objects (the tree's quotas are not
// in it) and for a group with a job that Kueue may put on several cards
// (the cards' order and the queue's flavorFungibility are not in it).
func (e *explainer) groupShape(g group, want map[string][]string) (string, bool) {
	if len(e.p.Cohorts) > 0 {
		return "", false
	}
	for _, q := range g.queues {
		for _, tn := range e.templatesBy[q] {
			if len(e.p.TemplateCards(e.p.Templates[tn])) > 1 {
				return "", false
			}
		}
	}
	var b strings.Builder
	cards := map[string]int{}
	card := func(c string) int {
		if i, ok := cards[c]; ok {
			return i
		}
		cards[c] = len(cards)
		return cards[c]
	}
	qi := map[string]int{}
	for i, q := range g.queues {
		qi[q] = i
		cq := e.p.Queues[q]
		fmt.Fprintf(&b, "q%d[", i)
		for _, c := range cq.FlavorNames() {
			fq := cq.Flavors[c]
			fmt.Fprintf(&b, "c%d:", card(c))
			for _, k := range policy.Kinds {
				qt := fq.Get(k)
				fmt.Fprintf(&b, "%d/%s/%s,", qt.Nominal, ptrWords(qt.BorrowingLimit), ptrWords(qt.LendingLimit))
			}
		}
		_, thr := e.threshold(q)
		pre := cq.Preemption
		fmt.Fprintf(&b, "]%s/%s/%s/%s/%v;", pre.WithinClusterQueue, pre.ReclaimWithinCohort, pre.BorrowWithinCohort, ptrWords(thr), want[q])
	}
	for _, c := range e.classes(g) {
		fmt.Fprintf(&b, "w%d/%v/c%d/%d/", qi[c.queue], c.service != "", card(c.card), c.value)
		for _, k := range policy.Kinds {
			fmt.Fprintf(&b, "%d,", c.req.Get(k))
		}
	}
	return b.String(), true
}

// ptrWords writes an optional limit or threshold for groupShape: "-" when
// unset.
func ptrWords[T int32 | int64](v *T) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func (e *explainer) exhaustiveIn(g group, want map[string][]string, closest bool, res *exhaustiveResult) {
	keep := map[string]bool{}
	for _, q := range g.queues {
		keep[q] = true
	}
	s := newSnapshotOf(e.p, keep)
	cls := e.classes(g)
	var preemptors []int
	for i, c := range cls {
		if len(want[c.queue]) > 0 && !c.pinned {
			preemptors = append(preemptors, i)
		}
	}
	if len(preemptors) == 0 {
		return
	}
	remaining := 0
	for _, ss := range want {
		remaining += len(ss)
	}
	// orderMatters[v]: some preemptor may take a workload of value v as a
	// candidate, so the order among value v's workloads is searched.
	orderMatters := map[int32]bool{}
	for _, c := range cls {
		for _, pi := range preemptors {
			p := cls[pi]
			pre := e.p.Queues[p.queue].Preemption
			probe := &Workload{Value: c.value, Seq: 1 << 62}
			pw := &Workload{Value: p.value}
			if (c.queue == p.queue && satisfiesPolicy(pre.WithinClusterQueue, pw, probe)) ||
				(c.queue != p.queue && satisfiesPolicy(pre.ReclaimWithinCohort, pw, probe)) {
				orderMatters[c.value] = true
			}
		}
	}
	var seq []*Workload
	present := map[string]bool{}
	done := func() bool { return res.cut || (remaining == 0 && !closest) }
	if !closest {
		// Seeds first: states that fire most paths, so that the search
		// rarely runs long where a path fires. Each is also a state of
		// the search below; they only change the order.
		e.seeds(s, cls, preemptors, want, res, &remaining)
		if done() {
			return
		}
	}
	var visit func(from int)
	visit = func(from int) {
		if done() {
			return
		}
		res.states++
		if res.states+res.seeded > DeadSearchBudget {
			res.cut = true
			return
		}
		for _, pi := range preemptors {
			c := cls[pi]
			if c.service != "" && present[c.service] {
				continue
			}
			e.tryAll(s, c, seq, want[c.queue], res, &remaining, closest)
			if done() {
				return
			}
		}
		var lastVal int32
		if len(seq) > 0 {
			lastVal = seq[len(seq)-1].Value
		}
		for i := from; i < len(cls); i++ {
			c := cls[i]
			if len(seq) > 0 && c.value < lastVal {
				continue
			}
			if c.service != "" && present[c.service] {
				continue
			}
			w := c.workload(s)
			if !s.Fits(w) {
				continue
			}
			s.Add(w)
			seq = append(seq, w)
			if c.service != "" {
				present[c.service] = true
			}
			// Within a value whose order matters, any class may come
			// next; otherwise classes in index order (one order per set).
			next := i
			if orderMatters[c.value] {
				next = firstOfValue(cls, c.value)
			}
			visit(next)
			if c.service != "" {
				present[c.service] = false
			}
			seq = seq[:len(seq)-1]
			s.Remove(w)
			if done() {
				return
			}
		}
	}
	visit(0)
}

func firstOfValue(cls []wclass, v int32) int {
	for i, c := range cls {
		if c.value == v {
			return i
		}
	}
	return 0
}

// tryAll tries one preemptor class in the current state, under every split
// of its equal-priority workloads into created before and after it where
// LowerOrNewerEqualPriority reads that.
func (e *explainer) tryAll(s *Snapshot, c wclass, seq []*Workload, settings []string, res *exhaustiveResult, remaining *int, closest bool) {
	pre := e.p.Queues[c.queue].Preemption
	var eq []*Workload
	for _, x := range seq {
		if x.Value != c.value {
			continue
		}
		if (x.Queue == c.queue && pre.WithinClusterQueue == "LowerOrNewerEqualPriority") ||
			(x.Queue != c.queue && pre.ReclaimWithinCohort == "LowerOrNewerEqualPriority") {
			eq = append(eq, x)
		}
	}
	splits := newerSplits(eq, c.queue)
	if len(splits) > maxSplits {
		// Too many splits of one state: the search is cut rather than
		// guessed.
		res.cut = true
		return
	}
	w := c.workload(s)
	saved := make([]int64, len(eq))
	for i, x := range eq {
		saved[i] = x.Seq
	}
	defer func() {
		for i, x := range eq {
			x.Seq = saved[i]
		}
	}()
	for si, newer := range splits {
		for i, x := range eq {
			x.Seq = saved[i]
		}
		for i, x := range newer {
			x.Seq = w.Seq + 1 + int64(i)
		}
		if si > 0 {
			res.states++
		}
		d := s.Decide(w)
		witness := func() *Witness {
			wt := &Witness{Preemptor: *w}
			for i, x := range seq {
				wt.Running = append(wt.Running, *x)
				for _, n := range newer {
					if n == x {
						wt.Newer = append(wt.Newer, i)
					}
				}
			}
			return wt
		}
		got := map[string]bool{}
		if d.Outcome == Preempt {
			for _, t := range d.Targets {
				got[PolicyOf(t.Reason)] = true
				if t.Reason == ReasonInCohortReclaimWhileBorrowing {
					got["reclaimWithinCohort"] = true
				}
			}
		}
		for _, st := range settings {
			if res.fired[c.queue][st] != nil {
				continue
			}
			if got[st] {
				if res.fired[c.queue] == nil {
					res.fired[c.queue] = map[string]*Witness{}
				}
				res.fired[c.queue][st] = witness()
				*remaining--
				continue
			}
			if closest && (d.Outcome == Wait || d.Outcome == Admit) {
				// Score: the would-be victims first, then a wait over an
				// admission, then the workloads running where the setting
				// looks (+1, so that a state with none still counts).
				victims, near := e.wouldBeVictims(s, w, st, seq)
				n := (2*victims)*(len(seq)+1) + near + 1
				if d.Outcome == Wait {
					n += len(seq) + 1
				}
				if res.closestN[c.queue] == nil {
					res.closestN[c.queue] = map[string]int{}
					res.closest[c.queue] = map[string]*Witness{}
				}
				if n > res.closestN[c.queue][st] {
					res.closestN[c.queue][st] = n
					res.closest[c.queue][st] = witness()
				}
			}
		}
	}
}

// wouldBeVictims counts the running workloads a setting names as victims
// of w (in w's queue for withinClusterQueue, satisfying its policy; in the
// cohort's other queues for the other two, satisfying reclaimWithinCohort
// and, for borrowWithinCohort, below w and at most the threshold), and
// the running workloads where the setting looks (near).
func (e *explainer) wouldBeVictims(s *Snapshot, w *Workload, setting string, seq []*Workload) (victims, near int) {
	cq := s.queue(w.Queue)
	for _, x := range seq {
		same := x.Queue == w.Queue
		if same == (setting == "withinClusterQueue") {
			near++
		}
		switch setting {
		case "withinClusterQueue":
			if same && satisfiesPolicy(cq.pre.WithinClusterQueue, w, x) {
				victims++
			}
		case "reclaimWithinCohort":
			if !same && satisfiesPolicy(cq.pre.ReclaimWithinCohort, w, x) {
				victims++
			}
		case "borrowWithinCohort":
			if !same && x.Value < w.Value && (cq.threshold == nil || x.Value <= *cq.threshold) {
				victims++
			}
		}
	}
	return victims, near
}

// DeadPath is a preemption setting the dead-path search examined, for
// tests that drive the real Kueue through it.
type DeadPath struct {
	Queue, Setting string
	// Fired is a state in which Kueue fires it (nil: none found).
	Fired *Witness
	// Closest is the state nearest to firing it (see exhaustiveResult).
	Closest *Witness
	// States is how many states the search visited; Cut is true when it
	// stopped at DeadSearchBudget.
	States int
	Cut    bool
}

// SearchPreemption runs the exhaustive search (see above) over every
// cohort with an enabled preemption setting, without the cold-start
// scenarios and without stopping early: every enabled setting, with a
// state that fires it or the state that comes closest. The policy should
// have passed policy.Check.
func SearchPreemption(p *policy.Policy) ([]DeadPath, error) {
	p, _, err := SizeLocks(p)
	if err != nil {
		return nil, err
	}
	e := &explainer{p: p, ladder: p.Ladder(), onDemand: p.OnDemandServices()}
	e.index()
	var out []DeadPath
	for _, g := range e.groups() {
		want := map[string][]string{}
		for _, q := range g.queues {
			for _, st := range deadSettings {
				if enabledSetting(e.p.Queues[q].Preemption, st) {
					want[q] = append(want[q], st)
				}
			}
		}
		if len(want) == 0 {
			continue
		}
		res := e.exhaustive(g, want, true)
		for _, q := range g.queues {
			for _, st := range want[q] {
				out = append(out, DeadPath{Queue: q, Setting: st, Fired: res.fired[q][st], Closest: res.closest[q][st], States: res.states, Cut: res.cut})
			}
		}
	}
	return out, nil
}

// Replay rebuilds a witness in a fresh snapshot of p: Running admitted in
// order, then the preemptor created (after them, except the workloads in
// Newer); it returns the snapshot, the preemptor and Kueue's decision for
// it (Decide).
func (w *Witness) Replay(p *policy.Policy) (*Snapshot, *Workload, Decision) {
	s := NewSnapshot(p)
	running := make([]*Workload, len(w.Running))
	for i, x := range w.Running {
		x.Seq, x.Admitted = 0, 0
		running[i] = s.NewWorkload(x)
		s.Add(running[i])
	}
	pw := w.Preemptor
	pw.Seq, pw.Admitted = 0, 0
	pre := s.NewWorkload(pw)
	for _, i := range w.Newer {
		s.seq++
		running[i].Seq = s.seq
	}
	return s, pre, s.Decide(pre)
}

// treeOf widens a group to every ClusterQueue under the same root cohort:
// with Cohort objects (a tree), queues of sibling cohorts share quota.
func (e *explainer) treeOf(g group) group {
	if g.name == "" || len(e.p.Cohorts) == 0 {
		return g
	}
	root := e.p.CohortRoot(g.name)
	out := group{name: g.name}
	for _, q := range e.p.QueueNames() {
		if c := e.p.Queues[q].Cohort; c != "" && e.p.CohortRoot(c) == root {
			out.queues = append(out.queues, q)
		}
	}
	return out
}

// seeds tries, for each queue with a path still to fire, the states built
// by filling that queue with its jobs at one priority and the cohort's
// other queues at another, in both orders (the queue first, then the
// others; the others first), with a preemptor of the queue after each
// admission. Such states are where an eviction hands a queue its quota
// back and the queue then preempts its own lower jobs, or where lenders
// and borrowers hold a cohort's pool at two priorities. Each state counts
// against DeadSearchBudget.
func (e *explainer) seeds(s *Snapshot, cls []wclass, preemptors []int, want map[string][]string, res *exhaustiveResult, remaining *int) {
	var byQueue = map[string][]int{}
	for _, pi := range preemptors {
		byQueue[cls[pi].queue] = append(byQueue[cls[pi].queue], pi)
	}
	queues := make([]string, 0, len(byQueue))
	for q := range byQueue {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	var seq []*Workload
	fill := func(inQueue bool, q string, v int32) {
		for i, c := range cls {
			if c.template == "" || c.value != v || (c.queue == q) != inQueue {
				continue
			}
			for n := 0; n < maxJobs; n++ {
				w := cls[i].workload(s)
				if !s.Fits(w) {
					break
				}
				s.Add(w)
				seq = append(seq, w)
			}
		}
	}
	allFired := func(q string) bool {
		for _, st := range want[q] {
			if res.fired[q][st] == nil {
				return false
			}
		}
		return true
	}
	// Lowest priorities first: low fillers are what preemptors evict.
	up := slices.Clone(e.ladder)
	slices.Reverse(up)
	for _, q := range queues {
		for _, p2 := range up {
			for _, p1 := range up {
				for _, qFirst := range []bool{true, false} {
					if *remaining == 0 || res.cut {
						return
					}
					if allFired(q) {
						break
					}
					if qFirst {
						fill(true, q, p1.Value)
						fill(false, q, p2.Value)
					} else {
						fill(false, q, p2.Value)
						fill(true, q, p1.Value)
					}
					res.seeded++
					if res.states+res.seeded > DeadSearchBudget {
						res.cut = true
					}
					present := map[string]bool{}
					for _, pi := range byQueue[q] {
						if c := cls[pi]; c.service == "" || !present[c.service] {
							e.tryAll(s, c, seq, want[q], res, remaining, false)
						}
					}
					for i := len(seq) - 1; i >= 0; i-- {
						s.Remove(seq[i])
					}
					seq = seq[:0]
				}
			}
		}
	}
}

// maxSplits bounds the splits newerSplits may return for one state.
const maxSplits = 1024

// newerSplits lists the sets of a preemptor's equal-priority workloads
// (eq) that may have been created after it, up to what Decide can tell
// apart: candidates are ordered by priority, then reservation, in two
// lists (the preemptor's queue; the cohort's other queues). Where one
// list holds one class of them (same queue, template or service), the
// workloads are interchangeable and only how many are newer matters (the
// most recently admitted ones stand for them); where it holds several,
// every subset. The first split is "none newer". It returns more than
// maxSplits splits only to say there are too many.
func newerSplits(eq []*Workload, queue string) [][]*Workload {
	lists := map[bool][]*Workload{}
	for _, x := range eq {
		lists[x.Queue == queue] = append(lists[x.Queue == queue], x)
	}
	out := [][]*Workload{nil}
	for _, same := range []bool{true, false} {
		ws := lists[same]
		if len(ws) == 0 {
			continue
		}
		classes := map[string]bool{}
		for _, x := range ws {
			classes[x.Queue+"/"+x.Template+"/"+x.Service] = true
		}
		var options [][]*Workload
		if len(classes) == 1 {
			sorted := append([]*Workload(nil), ws...)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i].Admitted > sorted[j].Admitted })
			for k := 0; k <= len(sorted); k++ {
				options = append(options, sorted[:k])
			}
		} else {
			if len(ws) > 10 {
				return make([][]*Workload, maxSplits+1)
			}
			for m := 0; m < 1<<len(ws); m++ {
				var o []*Workload
				for i, x := range ws {
					if m&(1<<i) != 0 {
						o = append(o, x)
					}
				}
				options = append(options, o)
			}
		}
		var next [][]*Workload
		for _, a := range out {
			for _, o := range options {
				next = append(next, append(append([]*Workload(nil), a...), o...))
				if len(next) > maxSplits {
					return next
				}
			}
		}
		out = next
	}
	return out
}
